// How long a worker's shutdown can take whatever the server does: against
// a stub server that stalls one kind of request, run() resolves within the
// stop deadline and the few seconds of grace the README promises (a release
// has 5 s in all, outcomes 5 s past the stop deadline, a claim's answer 3 s
// after the stop), and leaves no request behind.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Client, Worker, type JobContext } from "@readpast/client";

import { deadline, unique, waitUntil } from "./support.js";
import { apiError, claimedJob, stubServer, type StubAnswer, type StubRequest } from "./stub.js";

const quiet = { info: () => {}, warn: () => {}, error: () => {} };

/** A handler that runs until its signal aborts, noting when. */
function untilAborted(): { handler: (job: unknown, ctx: JobContext) => Promise<void>; started: () => boolean; abortedAt: () => number } {
  let started = false;
  let abortedAt = 0;
  return {
    handler: (_job, ctx) =>
      new Promise<void>((r) => {
        started = true;
        ctx.signal.addEventListener("abort", () => {
          abortedAt = Date.now();
          r();
        });
      }),
    started: () => started,
    abortedAt: () => abortedAt,
  };
}

/** The stub's answers but for what `special` answers: the first claim
 * gets one job, later ones none at once; releases, heartbeats and
 * completions succeed. */
function routes(queue: string, special: (req: StubRequest, n: number) => StubAnswer | undefined) {
  return (req: StubRequest, n: number): StubAnswer => {
    const s = special(req, n);
    if (s !== undefined) return s;
    if (req.path === "/v1/claim") return { body: { jobs: n === 0 ? [claimedJob(1, queue)] : [] } };
    if (req.path === "/v1/jobs/complete") return { body: { results: [{ id: 1, ok: true }] } };
    return { body: { ...claimedJob(1, queue), state: "pending" } };
  };
}

/** Resolves with the ms from now until done settles, or rejects once it
 * took more than capMs. */
async function took(done: Promise<void>, capMs: number): Promise<number> {
  const began = Date.now();
  const late = deadline(capMs).then(() => {
    throw new Error(`run() still pending ${capMs} ms after the stop`);
  });
  await Promise.race([done, late]);
  return Date.now() - began;
}

describe("a worker's shutdown against a server that stalls", () => {
  test("a release's retries share its 5 s: a 503 with Retry-After 4, then a stall, ends 5 s after the stop", async (t) => {
    const queue = unique("release-window");
    const stub = await stubServer(
      t,
      routes(queue, (req, n) => {
        if (!req.path.endsWith("/release")) return undefined;
        return n === 0 ? { status: 503, headers: { "Retry-After": "4" }, body: apiError("unavailable", "busy") } : "stall";
      }),
    );
    const h = untilAborted();
    const worker = new Worker(new Client(stub.url), {
      queues: [queue],
      handlers: { k: h.handler },
      waitMs: 0,
      leaseMs: 60_000,
      logger: quiet,
      opentelemetry: false,
    });
    const done = worker.run();
    await waitUntil(h.started, "the job to run");
    worker.stop({ timeoutMs: 0 });
    const ms = await took(done, 12_000);
    // Retried after 4 s with the 1 s left, not with 5 s more.
    assert.ok(ms < 7_000, `run() resolved ${ms} ms after the stop`);
    assert.equal(stub.to("/release").length, 2);
    assert.equal(worker.counts.released, 0);
  });

  test("outcomes still unsent 5 s past the stop deadline are given up, batched or alone, and not retried", async (t) => {
    const queue = unique("outcome-grace");
    const stub = await stubServer(
      t,
      routes(queue, (req) => (req.path.endsWith("/complete") ? "stall" : undefined)),
    );
    const errors: string[] = [];
    const worker = new Worker(new Client(stub.url), {
      queues: [queue],
      handlers: { k: () => "done" },
      waitMs: 0,
      shutdownTimeoutMs: 1_000,
      logger: { ...quiet, error: (m) => errors.push(m) },
      opentelemetry: false,
    });
    const done = worker.run();
    await waitUntil(() => stub.to("/v1/jobs/complete").length > 0, "the completion to be sent");
    worker.stop(); // the deadline is 1 s on; the grace for outcomes ends 5 s after it
    const ms = await took(done, 10_000);
    assert.ok(ms >= 5_000 && ms < 8_500, `run() resolved ${ms} ms after the stop`);
    assert.equal(stub.to("/v1/jobs/complete").length, 1, "the batch was sent again");
    assert.equal(stub.to("/v1/jobs/1/complete").length, 0, "the completion was tried alone past the grace");
    const [batch] = stub.to("/v1/jobs/complete");
    const ended = await Promise.race([batch!.ended, deadline(1_000).then(() => 0)]);
    assert.ok(ended > 0, "the batch's request is still open after run() resolved");
    assert.equal(worker.counts.succeeded, 0);
    assert.ok(
      errors.some((m) => /gave up 1 outcome/.test(m)),
      `no error logged the outcome given up: ${JSON.stringify(errors)}`,
    );
  });

  test("stop({ timeoutMs: 0 }) releases the running jobs at once while a claim's answer stalls", async (t) => {
    const queue = unique("claim-stall");
    const stub = await stubServer(
      t,
      routes(queue, (req, n) => (req.path === "/v1/claim" && n > 0 ? "stall" : undefined)),
    );
    const h = untilAborted();
    const worker = new Worker(new Client(stub.url), {
      queues: [queue],
      handlers: { k: h.handler },
      concurrency: 2, // it claims again while the job runs
      waitMs: 20_000,
      leaseMs: 60_000,
      logger: quiet,
      opentelemetry: false,
    });
    const done = worker.run();
    await waitUntil(() => h.started() && stub.to("/v1/claim").length === 2, "the job to run and the next claim to wait");
    const stopped = Date.now();
    worker.stop({ timeoutMs: 0 });
    const ms = await took(done, 10_000);
    const abortedIn = h.abortedAt() - stopped;
    const released = stub.to("/release")[0];
    assert.ok(abortedIn >= 0 && abortedIn < 1_500, `the handler's signal aborted ${abortedIn} ms after the stop`);
    assert.ok(released !== undefined && released.at - stopped < 1_500, "the job was not released at once");
    assert.equal(worker.counts.released, 1);
    // The claim's answer is given its 3 s, no more.
    assert.ok(ms < 6_000, `run() resolved ${ms} ms after the stop`);
  });

  test("no heartbeat in flight outlives run()", async (t) => {
    const queue = unique("heartbeat-inflight");
    const stub = await stubServer(
      t,
      routes(queue, (req) => (req.path.endsWith("/heartbeat") ? "stall" : undefined)),
    );
    const h = untilAborted();
    const worker = new Worker(new Client(stub.url), {
      queues: [queue],
      handlers: { k: h.handler },
      waitMs: 0,
      leaseMs: 30_000,
      heartbeatMs: 2_000, // each heartbeat waits 2 s for its answer
      logger: quiet,
      opentelemetry: false,
    });
    const done = worker.run();
    await waitUntil(() => stub.to("/heartbeat").length > 0, "a heartbeat to be sent");
    worker.stop({ timeoutMs: 0 });
    await took(done, 6_000);
    const resolved = Date.now();
    const [beat] = stub.to("/heartbeat");
    const ended = await Promise.race([beat!.ended, deadline(1_500).then(() => 0)]);
    const after = ended ? `${ended - resolved}` : "> 1500";
    assert.ok(ended > 0 && ended - resolved < 500, `the heartbeat's request ended ${after} ms after run() resolved`);
    assert.equal(worker.counts.released, 1);
  });
});
