// The Worker where requests and answers cross: a job claimed again while
// its old run still sends its outcome, a heartbeat that gets no answer, a
// stop that lands between a claim answer's headers and its body, and a stop
// before run(). Each fake fetch here wraps the real one to the test server
// and delays or drops one kind of request.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  Cancel,
  Client,
  RequestTimeoutError,
  Snooze,
  Worker,
  WorkerStoppedError,
  type Handler,
  type JobContext,
  type Logger,
} from "@readpast/client";

import { client, deadline, finished, serverURL, sleep, token, unique, waitUntil } from "./support.js";

const c = client();

function quiet(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
}

function pathOf(input: Parameters<typeof fetch>[0]): string {
  return new URL(input instanceof Request ? input.url : String(input)).pathname;
}

/** Rejects with what after ms, for the losing side of a race. */
function overdue(ms: number, what: string): Promise<never> {
  return deadline(ms).then(() => {
    throw new Error(`${what} took longer than ${ms} ms`);
  });
}

/** A Response whose headers are there at once and whose body comes when
 * `release` is called; aborting `signal` before then errors the body, as
 * fetch does with a body still on the wire. */
function heldResponse(res: Response, text: string, signal: AbortSignal | null | undefined): { res: Response; release: () => void } {
  let release!: () => void;
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      let open = true;
      const onAbort = (): void => {
        if (!open) return;
        open = false;
        ctl.error(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      release = () => {
        signal?.removeEventListener("abort", onAbort);
        if (!open) return;
        open = false;
        ctl.enqueue(new TextEncoder().encode(text));
        ctl.close();
      };
    },
  });
  const headers = { "Content-Type": res.headers.get("Content-Type") ?? "application/json" };
  return { res: new Response(body, { status: res.status, headers }), release };
}

/** Waits until the job's signal aborts (or 15 s), and returns the reason. */
function untilAborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(signal.reason);
    const t = setTimeout(() => resolve("not aborted within 15 s"), 15_000);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve(signal.reason);
    });
  });
}

describe("worker races", { concurrency: true }, () => {
  test("a job claimed again while its old run still sends its outcome keeps its slot", async (t) => {
    const queue = unique("race");
    let answerSnooze!: () => void;
    const snoozeHeld = new Promise<void>((r) => (answerSnooze = r));
    // The snooze is written at once; its answer comes when the test says.
    const wc = client({
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        if (/^\/v1\/jobs\/\d+\/snooze$/.test(pathOf(input))) await Promise.race([snoozeHeld, deadline(15_000)]);
        return res;
      },
    });
    const snoozer = await c.enqueue({ kind: "snooze-once", queue, max_attempts: 5 });
    const calls = new Map<number, number>();
    let running = 0;
    let most = 0;
    const reasons: unknown[] = [];
    const block = async (_job: unknown, { signal }: JobContext): Promise<string> => {
      running++;
      most = Math.max(most, running);
      reasons.push(await untilAborted(signal));
      running--;
      return "done";
    };
    const handlers: Record<string, Handler> = {
      "snooze-once": (job, ctx) => {
        const n = (calls.get(job.id) ?? 0) + 1;
        calls.set(job.id, n);
        return n === 1 ? new Snooze(0) : block(job, ctx);
      },
      block,
    };
    const worker = new Worker(wc, {
      queues: [queue],
      handlers,
      concurrency: 2,
      waitMs: 500,
      shutdownTimeoutMs: 300,
      logger: quiet(),
      opentelemetry: false,
    });
    const done = worker.run();
    t.after(async () => {
      answerSnooze();
      worker.stop({ timeoutMs: 0 });
      await done;
    });
    // The snooze is written, its answer not yet there: the worker, with a
    // slot free, claims the job again and runs it.
    await waitUntil(() => calls.get(snoozer.id) === 2, "the snoozed job to be claimed again");
    assert.equal(running, 1);
    answerSnooze();
    await waitUntil(() => worker.counts.snoozed === 1, "the old run's snooze answer");
    await sleep(50);
    assert.deepEqual(worker.runningJobs(), [snoozer.id], "the new run still holds its slot");
    // One slot is free: of two more jobs, one runs.
    await c.enqueueMany([0, 1].map(() => ({ kind: "block", queue, max_attempts: 1 })));
    await waitUntil(() => running === 2, "a second handler");
    await sleep(1000); // long enough for another claim to take the other job
    assert.equal(most, 2, "never more handlers than concurrency");
    assert.equal(worker.runningJobs().length, 2);
    // stop() releases every running job, the re-claimed one too.
    worker.stop();
    await Promise.race([done, overdue(10_000, "the stop")]);
    assert.equal(reasons.length, 2);
    for (const r of reasons) assert.ok(r instanceof WorkerStoppedError, String(r));
    const j = await c.getJob(snoozer.id);
    assert.deepEqual([j.state, j.snoozes], ["pending", 1]);
    assert.equal(worker.counts.released, 2);
  });

  test("a heartbeat that gets no answer is sent again before the lease ends", async (t) => {
    const queue = unique("race");
    let dropped = 0;
    let beats = 0;
    // The first heartbeat is never answered (a connection dropped silently).
    const wc = client({
      fetch: (input, init) => {
        if (/^\/v1\/jobs\/\d+\/heartbeat$/.test(pathOf(input))) {
          beats++;
          if (dropped === 0) {
            dropped++;
            return new Promise((_resolve, reject) => {
              const s = init?.signal;
              s?.addEventListener("abort", () => reject(s.reason), { once: true });
            });
          }
        }
        return fetch(input, init);
      },
    });
    const job = await c.enqueue({ kind: "slow", queue, max_attempts: 1 });
    const log = quiet();
    const worker = new Worker(wc, {
      queues: [queue],
      // A dropped heartbeat at 600 ms waits at most 600 ms for its answer
      // and goes again at once: the lease is extended at about 1200 ms,
      // well before it ends. Waiting for the client's timeout (30 s)
      // would lose it at 3000 ms, and the server would take the job back.
      leaseMs: 3000,
      heartbeatMs: 600,
      waitMs: 2000,
      logger: log,
      opentelemetry: false,
      handlers: {
        slow: async () => {
          await sleep(4500);
          return "done";
        },
      },
    });
    const done = worker.run();
    t.after(async () => {
      worker.stop({ timeoutMs: 0 });
      await done;
    });
    const j = await finished(c, job.id);
    assert.equal(dropped, 1);
    const why = `job: ${JSON.stringify(j)}\nworker:\n${log.lines.join("\n")}`;
    assert.deepEqual([j.state, j.attempt, j.result], ["succeeded", 1, "done"], `never taken back and run again\n${why}`);
    assert.equal(worker.counts.lost, 0);
    assert.ok(beats >= 5, `${beats} heartbeats`);
  });

  test("a handler's Cancel after its claim was lost cancels nothing", async (t) => {
    const queue = unique("race");
    // Every heartbeat gets a 503: the worker cannot tell its lease is gone.
    const wc = client({
      fetch: (input, init) =>
        /^\/v1\/jobs\/\d+\/heartbeat$/.test(pathOf(input))
          ? Promise.resolve(new Response('{"code":"unavailable","message":"down"}', { status: 503 }))
          : fetch(input, init),
    });
    let giveUp!: () => void;
    const cancelNow = new Promise<void>((r) => (giveUp = r));
    const job = await c.enqueue({ kind: "cancels", queue, max_attempts: 5 });
    const worker = new Worker(wc, {
      queues: [queue],
      leaseMs: 1000,
      heartbeatMs: 300,
      waitMs: 500,
      logger: quiet(),
      opentelemetry: false,
      handlers: {
        cancels: async () => {
          await Promise.race([cancelNow, deadline(15_000)]);
          return new Cancel("not needed");
        },
      },
    });
    const done = worker.run();
    t.after(async () => {
      giveUp();
      worker.stop({ timeoutMs: 0 });
      await done;
    });
    await waitUntil(() => worker.runningJobs().length === 1, "the worker to take the job");
    // The lease ends, the server rescues the job and another worker claims it.
    let other: Awaited<ReturnType<typeof c.claim>> = [];
    await waitUntil(async () => {
      other = await c.claim({ queues: [queue], worker: "other", limit: 1, lease_seconds: 60 });
      return other.length === 1;
    }, "the job to be rescued and claimed by another worker");
    assert.equal(other[0].id, job.id);
    giveUp();
    await waitUntil(() => worker.counts.lost + worker.counts.cancelled === 1, "the handler's cancel to be answered");
    assert.deepEqual([worker.counts.cancelled, worker.counts.lost], [0, 1], "a cancel under a lost claim is refused");
    const j = await c.getJob(job.id);
    assert.deepEqual([j.state, j.attempt], ["running", 2], "the other worker's attempt goes on");
    await c.complete(job.id, other[0].token, "by the other worker");
    assert.equal((await c.getJob(job.id)).state, "succeeded");
  });

  test("jobs whose claim answer arrives after stop() are released", async (t) => {
    const queue = unique("race");
    const job = await c.enqueue({ kind: "k", queue, max_attempts: 3 });
    let worker!: Worker;
    let claimsAnswered = 0;
    const wc = client({
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        if (pathOf(input) !== "/v1/claim") return res;
        const text = await res.text();
        const n = (JSON.parse(text) as { jobs?: unknown[] }).jobs?.length ?? 0;
        if (n === 0) return new Response(text, { status: res.status, headers: res.headers });
        claimsAnswered++;
        // The headers are in; stop() lands before the body is read.
        const held = heldResponse(res, text, init?.signal);
        setTimeout(() => {
          worker.stop();
          setTimeout(held.release, 200);
        }, 50);
        return held.res;
      },
    });
    const ran: number[] = [];
    worker = new Worker(wc, {
      queues: [queue],
      waitMs: 2000,
      logger: quiet(),
      opentelemetry: false,
      handlers: { k: (j) => void ran.push(j.id) },
    });
    const done = worker.run();
    t.after(async () => {
      worker.stop({ timeoutMs: 0 });
      await done;
    });
    await Promise.race([done, overdue(10_000, "the stop")]);
    assert.equal(claimsAnswered, 1);
    assert.deepEqual(ran, [], "claimed while stopping: not run");
    assert.equal(worker.counts.claimed, 1);
    assert.equal(worker.counts.released, 1);
    const j = await c.getJob(job.id);
    // Released: pending again at once, the attempt not counted; not left
    // running until its lease ends.
    assert.deepEqual([j.state, j.attempt], ["pending", 0]);
  });

  /** Runs a worker of wc on queue with polls of 5 s and a lease of
   * leaseMs, whose handler returns at once; it stops at the test's end. */
  function runWorker(
    t: { after: (fn: () => Promise<void>) => void },
    wc: Client,
    queue: string,
    leaseMs: number,
  ): { worker: Worker; done: Promise<void> } {
    const worker = new Worker(wc, { queues: [queue], leaseMs, waitMs: 5000, logger: quiet(), opentelemetry: false, handlers: { k: () => "ran" } });
    const done = worker.run();
    t.after(async () => {
      worker.stop({ timeoutMs: 0 });
      await done;
    });
    return { worker, done };
  }

  /** runWorker with a 2 s lease, and its job enqueued 2.5 s into its first
   * poll, past the lease counted from when the claim was sent. */
  async function lateInItsPoll(
    t: { after: (fn: () => Promise<void>) => void },
    wc: Client,
    queue: string,
  ): Promise<{ worker: Worker; done: Promise<void>; job: { id: number } }> {
    const { worker, done } = runWorker(t, wc, queue, 2000);
    await sleep(2500);
    const job = await c.enqueue({ kind: "k", queue, max_attempts: 3 });
    return { worker, done, job };
  }

  test("a release of a claim answered late in its long poll gets its whole 5 s", async (t) => {
    const queue = unique("race");
    let worker!: Worker;
    let releases = 0;
    // The claim is answered 2.5 s into its poll, past the 2 s lease counted
    // from when the claim was sent; its answer comes after stop(); the
    // first release is refused with a 503 and Retry-After: 1.
    const wc = client({
      fetch: async (input, init) => {
        if (/^\/v1\/jobs\/\d+\/release$/.test(pathOf(input)) && releases++ === 0) {
          return new Response('{"code":"unavailable","message":"down"}', { status: 503, headers: { "Retry-After": "1" } });
        }
        const res = await fetch(input, init);
        if (pathOf(input) !== "/v1/claim") return res;
        const text = await res.text();
        if (((JSON.parse(text) as { jobs?: unknown[] }).jobs?.length ?? 0) === 0) {
          return new Response(text, { status: res.status, headers: res.headers });
        }
        const held = heldResponse(res, text, init?.signal);
        setTimeout(() => {
          worker.stop();
          setTimeout(held.release, 100);
        }, 50);
        return held.res;
      },
    });
    let done: Promise<void>;
    let job: { id: number };
    ({ worker, done, job } = await lateInItsPoll(t, wc, queue));
    await Promise.race([done, overdue(10_000, "the stop")]);
    assert.equal(releases, 2, "the release was tried again after its Retry-After");
    assert.equal(worker.counts.released, 1);
    const j = await c.getJob(job.id);
    assert.deepEqual([j.state, j.attempt], ["pending", 0], "released, not left running until its lease ends");
  });

  test("an outcome of a claim answered late in its long poll is retried within the rest of its lease", async (t) => {
    const queue = unique("race");
    let completes = 0;
    // The claim is answered 2.5 s into its poll, past the 2 s lease counted
    // from when the claim was sent; the completion is refused with a 503
    // and Retry-After: 1 in its batch and alone, which the rest of the
    // lease leaves time to try again.
    const wc = client({
      fetch: (input, init) =>
        /\/complete$/.test(pathOf(input)) && completes++ < 2
          ? Promise.resolve(new Response('{"code":"unavailable","message":"down"}', { status: 503, headers: { "Retry-After": "1" } }))
          : fetch(input, init),
    });
    const { job } = await lateInItsPoll(t, wc, queue);
    const j = await finished(c, job.id);
    assert.deepEqual([j.state, j.attempt], ["succeeded", 1], "completed on its retry, not run again");
    assert.equal(completes, 3);
  });

  test("a waited_seconds no claim could have waited moves no lease", async (t) => {
    const queue = unique("race");
    const completes: number[] = [];
    // The answer says the claim waited 1,000,000 s; it took milliseconds.
    // Every completion is answered 503, Retry-After: 1: it is tried within
    // the 1.5 s lease and given up, not retried for the 5 s poll that never
    // was.
    const wc = client({
      fetch: async (input, init) => {
        if (/\/complete$/.test(pathOf(input))) {
          completes.push(Date.now());
          return new Response('{"code":"unavailable","message":"down"}', { status: 503, headers: { "Retry-After": "1" } });
        }
        const res = await fetch(input, init);
        if (pathOf(input) !== "/v1/claim") return res;
        const answer = (await res.json()) as { jobs: unknown[]; waited_seconds?: number };
        if (answer.jobs.length > 0) answer.waited_seconds = 1e6;
        return new Response(JSON.stringify(answer), { status: res.status, headers: res.headers });
      },
    });
    const job = await c.enqueue({ kind: "k", queue, max_attempts: 1 }); // not run again
    runWorker(t, wc, queue, 1500);
    await waitUntil(() => completes.length > 0, "the completion");
    await sleep(4000);
    assert.equal(completes.length, 3, `completions sent at ${completes.map((at) => at - completes[0]).join(", ")} ms`);
    assert.notEqual((await c.getJob(job.id)).state, "succeeded");
  });

  /** A client that records the path of every request it sends. */
  function recording(): { wc: Client; paths: string[] } {
    const paths: string[] = [];
    const wc = client({
      fetch: (input, init) => {
        paths.push(pathOf(input));
        return fetch(input, init);
      },
    });
    return { wc, paths };
  }

  test("a run() after its signal aborted returns at once, claiming nothing", async (t) => {
    const { wc, paths } = recording();
    const ac = new AbortController();
    const worker = new Worker(wc, { queues: [unique("race")], handlers: {}, waitMs: 5000, signal: ac.signal, logger: quiet(), opentelemetry: false });
    const first = worker.run();
    t.after(async () => {
      worker.stop({ timeoutMs: 0 });
      await first;
    });
    await waitUntil(() => paths.includes("/v1/claim"), "the first run's claim");
    ac.abort();
    await Promise.race([first, overdue(5000, "the stop by the signal")]);
    const claims = paths.length;
    await Promise.race([worker.run(), overdue(2000, "run() after its signal aborted")]);
    assert.equal(paths.length, claims, `requests after the signal: ${paths.slice(claims).join(", ")}`);
  });

  test("a stop() before run() makes run() return at once, claiming nothing", async (t) => {
    const { wc, paths } = recording();
    const worker = new Worker(wc, { queues: [unique("race")], handlers: {}, waitMs: 5000, logger: quiet(), opentelemetry: false });
    worker.stop();
    assert.equal(worker.stopping, true);
    const done = worker.run();
    t.after(async () => {
      worker.stop({ timeoutMs: 0 });
      await done;
    });
    await Promise.race([done, overdue(2000, "run() after stop()")]);
    assert.equal(paths.length, 0, `requests: ${paths.join(", ")}`);
    // A stopped worker runs again when asked to.
    const again = worker.run();
    await waitUntil(() => paths.includes("/v1/claim"), "a claim of the second run");
    assert.equal(worker.stopping, false);
    worker.stop();
    await Promise.race([again, overdue(5000, "the second stop")]);
  });
});

describe("transport and an abort", { concurrency: true }, () => {
  /** A client whose every answer is `{"ok":true}`, its body held until
   * release is called. */
  function heldClient(timeoutMs?: number): { client: Client; release: () => void; headersIn: Promise<void> } {
    let release = (): void => {};
    let headersIn!: () => void;
    const arrived = new Promise<void>((r) => (headersIn = r));
    const cl = new Client(serverURL, {
      token,
      timeoutMs,
      fetch: (_input, init) => {
        const signal = init?.signal;
        if (signal?.aborted) return Promise.reject(signal.reason);
        const held = heldResponse(new Response(null), '{"ok":true}', signal);
        release = held.release;
        setTimeout(headersIn, 0);
        return Promise.resolve(held.res);
      },
    });
    return { client: cl, release: () => release(), headersIn: arrived };
  }

  test("an abort after the answer's headers still reads the answer", async () => {
    const h = heldClient();
    const ctrl = new AbortController();
    const p = h.client.getJob(1, { signal: ctrl.signal });
    await h.headersIn;
    ctrl.abort(new Error("stop"));
    await sleep(20);
    h.release();
    assert.deepEqual(await p, { ok: true });
  });

  test("an abort before any answer rejects with its reason", async () => {
    let seen: AbortSignal | undefined;
    const cl = new Client(serverURL, {
      token,
      fetch: (_input, init) =>
        new Promise((_resolve, reject) => {
          seen = init?.signal ?? undefined;
          seen?.addEventListener("abort", () => reject(seen?.reason));
        }),
    });
    const ctrl = new AbortController();
    const p = cl.getJob(1, { signal: ctrl.signal });
    await sleep(20);
    const reason = new Error("stop");
    ctrl.abort(reason);
    await assert.rejects(p, (e) => e === reason);
    assert.equal(seen?.aborted, true, "the request itself is aborted");
  });

  test("a body that never comes is bounded by the request timeout", async () => {
    const h = heldClient(300);
    const ctrl = new AbortController();
    const p = h.client.getJob(1, { signal: ctrl.signal });
    await h.headersIn;
    ctrl.abort(new Error("stop"));
    const started = Date.now();
    await assert.rejects(p, RequestTimeoutError);
    assert.ok(Date.now() - started < 2000);
  });
});
