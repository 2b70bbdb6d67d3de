// The Worker against a real `readpast serve`: concurrency, outcomes,
// failures with their stacks, heartbeats, timeouts, lost claims and an
// in-process graceful stop.

import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";

import {
  Cancel,
  Discard,
  HandlerTimeoutError,
  JobLostError,
  Snooze,
  Worker,
  WorkerStoppedError,
  type Handler,
  type Logger,
  type WorkerOptions,
} from "@readpast/client";

import { client, deadline, finished, sleep, unique, waitUntil } from "./support.js";

const c = client();

/** Collects the worker's log lines. */
function collect(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (m) => lines.push(m),
    warn: (m) => lines.push(m),
    error: (m) => lines.push(m),
  };
}

/** Starts a worker on queue; it is stopped when the test ends. */
function start(
  t: TestContext,
  queue: string,
  handlers: Record<string, Handler>,
  options: Partial<WorkerOptions> = {},
): { worker: Worker; done: Promise<void>; ctrl: AbortController } {
  const ctrl = new AbortController();
  const worker = new Worker(c, {
    queues: [queue],
    handlers,
    waitMs: 5000,
    logger: collect(),
    opentelemetry: false,
    signal: ctrl.signal,
    shutdownTimeoutMs: 5000,
    ...options,
  });
  const done = worker.run();
  t.after(async () => {
    ctrl.abort();
    await done;
  });
  return { worker, done, ctrl };
}

describe("worker", { concurrency: true }, () => {
  test("runs jobs concurrently, each as a task", async (t) => {
    const queue = unique("w");
    let running = 0;
    let most = 0;
    let release!: () => void;
    const three = new Promise<void>((r) => (release = r));
    const jobs = await c.enqueueMany([0, 1, 2, 3, 4, 5].map((i) => ({ kind: "together", queue, payload: { i }, max_attempts: 1 })));
    const { worker, ctrl, done: stopped } = start(t, queue, {
      together: async (job) => {
        running++;
        most = Math.max(most, running);
        if (running === 3) release();
        await Promise.race([three, deadline(10_000)]);
        await sleep(50);
        running--;
        return { i: (job.payload as { i: number }).i, attempt: job.attempt };
      },
    }, { concurrency: 3 });
    const done = await Promise.all(jobs.map((j) => finished(c, j.id)));
    assert.deepEqual(
      done.map((j) => [j.state, j.result]),
      [0, 1, 2, 3, 4, 5].map((i) => ["succeeded", { i, attempt: 1 }]),
    );
    assert.equal(most, 3);
    // A job can read as finished before its worker counted it: stop first.
    ctrl.abort();
    await stopped;
    assert.equal(worker.counts.succeeded, 6);
    assert.equal(worker.counts.claimed, 6);
  });

  test("a thrown error fails the attempt with its stack; a kind without handler fails", async (t) => {
    const queue = unique("w");
    const flaky = await c.enqueue({ kind: "flaky", queue, max_attempts: 1 });
    const rejected = await c.enqueue({ kind: "rejects", queue, max_attempts: 1 });
    const unknown = await c.enqueue({ kind: "nobody-handles-this", queue, max_attempts: 1 });
    const { worker, ctrl, done: stopped } = start(t, queue, {
      flaky: () => {
        throw new RangeError("boom on attempt 1");
      },
      rejects: async () => {
        await sleep(10);
        throw "a plain string";
      },
    });
    const f = await finished(c, flaky.id);
    assert.equal(f.state, "failed");
    assert.equal(f.errors[0]?.message, "RangeError: boom on attempt 1");
    assert.match(f.errors[0]?.stack ?? "", /RangeError: boom on attempt 1\n\s+at .*worker\.test\.js/);
    assert.equal(f.errors[0]?.worker, worker.name);
    const r = await finished(c, rejected.id);
    assert.equal(r.errors[0]?.message, "thrown: a plain string");
    const u = await finished(c, unknown.id);
    assert.equal(u.state, "failed");
    assert.equal(u.errors[0]?.message, 'no handler registered for kind "nobody-handles-this"');
    ctrl.abort();
    await stopped;
    assert.equal(worker.counts.failed, 3);
  });

  test("a failed attempt is retried", async (t) => {
    const queue = unique("w");
    const job = await c.enqueue({ kind: "flaky", queue, max_attempts: 3 });
    start(t, queue, {
      flaky: (j) => {
        if (j.attempt === 1) throw new Error("first time");
        return { attempt: j.attempt };
      },
    });
    const done = await finished(c, job.id, 20_000);
    assert.equal(done.state, "succeeded");
    assert.deepEqual(done.result, { attempt: 2 });
    assert.equal(done.errors.length, 1);
  });

  test("Snooze, Cancel and Discard, returned or thrown", async (t) => {
    const queue = unique("w");
    const jobs = await c.enqueueMany(
      ["snooze-return", "snooze-throw", "cancel-return", "cancel-throw", "discard"].map((kind) => ({
        kind,
        queue,
        max_attempts: 5,
      })),
    );
    const { worker } = start(t, queue, {
      "snooze-return": () => new Snooze(600),
      "snooze-throw": async () => {
        throw new Snooze(600);
      },
      "cancel-return": () => new Cancel("not needed"),
      "cancel-throw": () => {
        throw new Cancel("gone");
      },
      discard: () => {
        throw new Discard("bad input: failing for good");
      },
    });
    await waitUntil(() => worker.counts.snoozed === 2 && worker.counts.cancelled === 2 && worker.counts.discarded === 1, "the outcomes");
    const [s1, s2, c1, c2, d] = await Promise.all(jobs.map((j) => c.getJob(j.id)));
    for (const s of [s1, s2]) {
      assert.equal(s?.state, "pending");
      assert.equal(s?.snoozes, 1);
      assert.ok(new Date(s?.run_at ?? 0).getTime() > Date.now() + 500_000);
    }
    assert.equal(c1?.state, "cancelled");
    assert.equal(c2?.state, "cancelled");
    assert.equal(d?.state, "failed");
    assert.equal(d?.attempt, 1);
    assert.equal(d?.errors[0]?.message, "bad input: failing for good");
  });

  test("heartbeats keep a job whose lease is shorter than its run", async (t) => {
    const queue = unique("w");
    const job = await c.enqueue({ kind: "slow", queue, max_attempts: 1 });
    let aborted = false;
    const { worker } = start(t, queue, {
      slow: async (_job, { signal }) => {
        await sleep(3500);
        aborted = signal.aborted;
        return "done";
      },
    }, { leaseMs: 1500 }); // heartbeats every 500 ms; the server takes back leases that end
    const done = await finished(c, job.id);
    assert.equal(done.state, "succeeded");
    assert.equal(done.attempt, 1, "never rescued and run again");
    assert.equal(done.result, "done");
    assert.equal(aborted, false);
    assert.equal(worker.counts.lost, 0);
  });

  test("a handler timeout aborts the job's signal and fails the attempt", async (t) => {
    const queue = unique("w");
    const job = await c.enqueue({ kind: "stuck", queue, max_attempts: 1 });
    let reason: unknown;
    const { worker, ctrl, done: stopped } = start(t, queue, {
      stuck: (_job, { signal }) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener("abort", () => {
            reason = signal.reason;
            reject(signal.reason);
          }),
        ),
    }, { handlerTimeoutMs: 300 });
    const done = await finished(c, job.id);
    assert.equal(done.state, "failed");
    assert.equal(done.errors[0]?.message, "handler timed out after 300 ms");
    assert.ok(reason instanceof HandlerTimeoutError);
    ctrl.abort();
    await stopped;
    assert.equal(worker.counts.timedOut, 1);
  });

  test("a cancelled job's claim is lost: its signal aborts and its outcome is dropped", async (t) => {
    const queue = unique("w");
    const job = await c.enqueue({ kind: "long", queue, max_attempts: 1 });
    let reason: unknown;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const { worker } = start(t, queue, {
      long: async (_job, { signal }) => {
        started();
        await new Promise((r) => signal.addEventListener("abort", r));
        reason = signal.reason;
        return "too late";
      },
    }, { leaseMs: 600 });
    await running;
    await c.cancelJob(job.id);
    await waitUntil(() => reason !== undefined, "the handler's signal to abort");
    assert.ok(reason instanceof JobLostError);
    await sleep(200);
    const j = await c.getJob(job.id);
    assert.equal(j.state, "cancelled");
    assert.equal(j.result, undefined);
    assert.ok(worker.counts.lost >= 1);
  });

  test("an aborted signal stops it: short jobs finish, long ones are released", async (t) => {
    const queue = unique("w");
    const jobs = await c.enqueueMany([
      { kind: "sleep", queue, payload: { ms: 200 } },
      { kind: "sleep", queue, payload: { ms: 60_000 } },
    ]);
    let reason: unknown;
    const { worker, done, ctrl } = start(t, queue, {
      sleep: async (job, { signal }) => {
        const ms = (job.payload as { ms: number }).ms;
        await new Promise((r) => {
          const timer = setTimeout(r, ms);
          signal.addEventListener("abort", () => {
            reason = signal.reason;
            clearTimeout(timer);
            r(undefined);
          });
        });
        return { slept: ms };
      },
    }, { concurrency: 2, shutdownTimeoutMs: 800 });
    await waitUntil(() => worker.runningJobs().length === 2, "both jobs to start");
    const stopped = Date.now();
    ctrl.abort();
    await done;
    const took = Date.now() - stopped;
    assert.ok(took >= 700 && took < 5000, `stopped in ${took} ms`);
    assert.equal(worker.stopping, true);
    assert.ok(reason instanceof WorkerStoppedError);
    const [short, long] = await Promise.all(jobs.map((j) => c.getJob(j.id)));
    assert.equal(short?.state, "succeeded");
    assert.equal(long?.state, "pending");
    assert.equal(long?.attempt, 0, "released: the attempt is not counted");
    assert.ok(new Date(long?.run_at ?? 0).getTime() <= Date.now());
    assert.deepEqual(long?.errors, []);
    assert.equal(worker.counts.released, 1);
  });

  test("without the batch completion route, jobs are completed one by one", async (t) => {
    const queue = unique("w");
    const jobs = await c.enqueueMany([0, 1, 2, 3].map((i) => ({ kind: "k", queue, payload: { i } })));
    const paths: string[] = [];
    const old = client({
      fetch: async (input, init) => {
        const path = new URL(String(input)).pathname;
        paths.push(path);
        if (path === "/v1/jobs/complete") {
          return new Response(JSON.stringify({ error: { code: "not_found", message: "no such route" } }), { status: 404 });
        }
        return fetch(input, init);
      },
    });
    const ctrl = new AbortController();
    const worker = new Worker(old, {
      queues: [queue],
      concurrency: 4,
      waitMs: 2000,
      signal: ctrl.signal,
      logger: collect(),
      opentelemetry: false,
      handlers: { k: (job) => job.payload },
    });
    const done = worker.run();
    t.after(async () => {
      ctrl.abort();
      await done;
    });
    const finishedJobs = await Promise.all(jobs.map((j) => finished(c, j.id)));
    assert.deepEqual(
      finishedJobs.map((j) => [j.state, j.result]),
      [0, 1, 2, 3].map((i) => ["succeeded", { i }]),
    );
    assert.equal(paths.filter((p) => p === "/v1/jobs/complete").length, 1, "asked once, then never again");
    assert.equal(paths.filter((p) => /^\/v1\/jobs\/\d+\/complete$/.test(p)).length, 4);
    // A job can read as finished before its worker has counted it: stop
    // first (the worker waits for its outcomes), then count.
    ctrl.abort();
    await done;
    assert.equal(worker.counts.succeeded, 4);
  });

  test("a claim the server refuses for good rejects run()", async () => {
    const worker = new Worker(c, { queues: ["has space"], handlers: {}, logger: collect(), opentelemetry: false });
    await assert.rejects(worker.run(), (e: unknown) => (e as { code: string }).code === "invalid_field");
  });

  test("bad options are refused at once", () => {
    assert.throws(() => new Worker(c, { handlers: {}, concurrency: 0 }), RangeError);
    assert.throws(() => new Worker(c, { handlers: {}, queues: [] }), TypeError);
    assert.throws(() => new Worker(c, { handlers: {}, leaseMs: 300, heartbeatMs: 300 }), RangeError);
    assert.throws(() => new Worker(c, { handlers: { k: 1 as unknown as Handler } }), TypeError);
    assert.throws(() => new Snooze(-1), RangeError);
  });
});
