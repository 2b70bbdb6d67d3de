// Client.enqueueFlow against a real `readpast serve`: jobs that run after
// other jobs, their edges' policies, and the refusals.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { InvalidFieldError, InvalidStateError, NotFoundError, type Job, type FlowJobSpec } from "@readpast/client";

import { client, unique } from "./support.js";

const c = client();
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/** Claims the one claimable job of queue, requires its kind, and
 * completes it (or fails it for good). */
async function finish(queue: string, kind: string, ok = true): Promise<Job> {
  const claimed = await c.claim({ worker: "ts-flow", queues: [queue], limit: 10, lease_seconds: 60 });
  assert.deepEqual(claimed.map((j) => j.kind), [kind]);
  const [job] = claimed;
  assert.ok(job);
  return ok ? c.complete(job.id, job.token) : c.fail(job.id, job.token, { error: "boom", discard: true });
}

describe("enqueueFlow", () => {
  test("jobs run after their parents, in order", async () => {
    const queue = unique("flow");
    const prior = await c.enqueue({ kind: "prior", queue });
    const jobs = await c.enqueueFlow([
      { ref: "extract", kind: "extract", queue, payload: { file: "a.csv" }, tags: ["f"] },
      { ref: "render", kind: "render", queue, after: [{ ref: "extract" }] },
      {
        kind: "email",
        queue,
        max_attempts: 2,
        run_at: new Date(Date.now() - 1000),
        after: [{ ref: "extract" }, { ref: "render", policy: "run_anyway" }, { job_id: prior.id }],
      },
    ]);
    assert.deepEqual(jobs.map((j) => [j.kind, j.state]), [
      ["extract", "pending"],
      ["render", "blocked"],
      ["email", "blocked"],
    ]);
    assert.deepEqual(jobs[0]?.payload, { file: "a.csv" });
    assert.deepEqual(jobs[0]?.tags, ["f"]);
    assert.equal(jobs[2]?.max_attempts, 2);
    const stats = await c.stats();
    assert.equal(stats.queues[queue]?.blocked, 2);
    assert.equal(stats.queues[queue]?.pending, 2);
    const blocked = await c.listJobs({ queue, state: "blocked" });
    assert.deepEqual(blocked.jobs.map((j) => j.id).sort(), [jobs[1]!.id, jobs[2]!.id].sort());

    const claimed = await c.claim({ worker: "ts-flow", queues: [queue], limit: 10, lease_seconds: 60 });
    assert.deepEqual(claimed.map((j) => j.kind).sort(), ["extract", "prior"]);
    for (const j of claimed) await c.complete(j.id, j.token);
    assert.equal((await c.getJob(jobs[1]!.id)).state, "pending");
    assert.equal((await c.getJob(jobs[2]!.id)).state, "blocked");
    await finish(queue, "render", false); // email runs anyway
    assert.equal((await c.getJob(jobs[2]!.id)).state, "pending");
    assert.equal((await finish(queue, "email")).state, "succeeded");
  });

  test("cancel_child and hold_child", async () => {
    const queue = unique("flow");
    const [a, b, held] = await c.enqueueFlow([
      { ref: "a", kind: "a", queue },
      { kind: "b", queue, after: [{ ref: "a" }] },
      { kind: "c", queue, after: [{ ref: "a", policy: "hold_child" }] },
    ]);
    assert.ok(a && b && held);
    await assert.rejects(c.runJob(b.id), InvalidStateError);
    await finish(queue, "a", false);
    const cancelled = await c.getJob(b.id);
    assert.equal(cancelled.state, "cancelled");
    assert.ok(cancelled.errors.length > 0, "the cancelled child names its parent in its errors");
    assert.equal((await c.getJob(held.id)).state, "blocked");
    await c.retryJob(a.id);
    await finish(queue, "a");
    assert.equal((await finish(queue, "c")).state, "succeeded");
  });

  test("trace context headers", async () => {
    const queue = unique("flow");
    const jobs = await c.enqueueFlow([{ ref: "t", kind: "t", queue }, { kind: "u", queue, after: [{ ref: "t" }] }], {
      traceparent: TRACEPARENT,
    });
    assert.deepEqual(jobs.map((j) => j.traceparent), [TRACEPARENT, TRACEPARENT]);
  });

  test("refusals name the entry, and store nothing", async () => {
    const queue = unique("flow");
    await assert.rejects(c.enqueueFlow([{ kind: "a", queue, after: [{ ref: "nope" }] }]), (e: unknown) => {
      assert.ok(e instanceof InvalidFieldError);
      assert.equal(e.field, "jobs[0].after[0].ref");
      return true;
    });
    await assert.rejects(
      c.enqueueFlow([
        { ref: "a", kind: "a", queue, after: [{ ref: "b" }] },
        { ref: "b", kind: "b", queue, after: [{ ref: "a" }] },
      ]),
      (e: unknown) => e instanceof InvalidFieldError && /cycle/.test(e.message),
    );
    await assert.rejects(c.enqueueFlow([{ kind: "a", queue, after: [{ job_id: 99999999 }] }]), (e: unknown) => {
      assert.ok(e instanceof NotFoundError);
      assert.match(e.message, /99999999/);
      assert.equal(e.field, "jobs[0].after[0].job_id");
      return true;
    });
    const done = await c.enqueue({ kind: "done", queue });
    await c.cancelJob(done.id);
    await assert.rejects(c.enqueueFlow([{ kind: "a", queue, after: [{ job_id: done.id }] }]), (e: unknown) => {
      assert.ok(e instanceof InvalidStateError);
      assert.match(e.message, new RegExp(`${done.id} is cancelled`));
      return true;
    });
    assert.deepEqual((await c.listJobs({ queue })).jobs.map((j) => j.id), [done.id]);

    // Refused before anything is sent.
    await assert.rejects(c.enqueueFlow([]), TypeError);
    await assert.rejects(c.enqueueFlow([{ kind: "a", after: "b" } as unknown as FlowJobSpec]), TypeError);
    await assert.rejects(c.enqueueFlow([{ kind: "a", after: [7] } as unknown as FlowJobSpec]), TypeError);
  });
});
