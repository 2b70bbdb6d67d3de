// Batches against a real `readpast serve`: Client.openBatch, addToBatch,
// sealBatch and batch, the finishing job held until the seal and every
// member's end, on_success, and a Worker's finishing job reading its own
// batch.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Discard, InvalidInputError, InvalidStateError, NotFoundError, Worker, type Batch, type ClaimedJob } from "@readpast/client";

import { client, unique } from "./support.js";

const c = client();

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const counts = (b: Batch) => [b.members, b.live, b.succeeded, b.failed, b.cancelled];

function claimAll(queue: string): Promise<ClaimedJob[]> {
  return c.claim({ worker: "ts-bt", queues: [queue], limit: 10 });
}

describe("batches", () => {
  test("open, join twice, the finishing job runs after the seal and every member", async () => {
    const queue = unique("bt");
    const b = await c.openBatch({ finisher: { kind: "notify", payload: { to: "ops" }, queue } });
    assert.equal(b.id, b.finisher.id);
    assert.deepEqual([b.on_success, b.sealed, b.finisher.state, b.finisher.payload], [false, false, "blocked", { to: "ops" }]);
    assert.deepEqual(counts(b), [0, 0, 0, 0, 0]);

    const first = await c.addToBatch(b.id, [
      { kind: "thumb", payload: { file: "a" }, queue },
      { kind: "thumb", payload: { file: "b" }, queue, max_attempts: 1 },
    ]);
    assert.deepEqual(first.map((j) => [j.kind, j.state]), [["thumb", "pending"], ["thumb", "pending"]]);
    const members = [...first, ...(await c.addToBatch(b.id, [{ kind: "thumb", queue, run_at: new Date() }]))];
    const open = await c.batch(b.id);
    assert.deepEqual([open.members, open.live, open.sealed, open.finisher.state], [3, 3, false, "blocked"]);

    const claimed = await claimAll(queue);
    const ids = (js: { id: number }[]) => js.map((j) => j.id).sort((x, y) => x - y);
    assert.deepEqual(ids(claimed), ids(members), "a claim took the finishing job of an open batch");
    for (const j of claimed) {
      if (j.id === members[1]?.id) assert.equal((await c.fail(j.id, j.token, { error: "broken image" })).state, "failed");
      else await c.complete(j.id, j.token, { ok: true });
    }
    const ended = await c.batch(b.id);
    assert.deepEqual(counts(ended), [3, 0, 2, 1, 0]);
    assert.equal(ended.finisher.state, "blocked");
    assert.deepEqual(await claimAll(queue), [], "the finishing job ran before the seal");

    const sealed = await c.sealBatch(b.id);
    assert.deepEqual([sealed.sealed, sealed.finisher.state], [true, "pending"]);
    const again = await c.sealBatch(b.id);
    assert.deepEqual([again.sealed, again.members, again.finisher.state], [true, 3, "pending"]);

    const [fin, ...more] = await claimAll(queue);
    assert.ok(fin);
    assert.deepEqual([fin.id, fin.kind, more.length], [b.id, "notify", 0]);
    const seen = await c.batch(fin.id);
    assert.deepEqual([seen.sealed, ...counts(seen), seen.finisher.state], [true, 3, 0, 2, 1, 0, "running"]);

    await assert.rejects(c.addToBatch(b.id, [{ kind: "thumb", queue }]), (e: unknown) => {
      assert.ok(e instanceof InvalidStateError);
      assert.deepEqual([e.status, e.code], [409, "invalid_state"]);
      assert.match(e.detail, /sealed/);
      return true;
    });
    assert.equal((await c.batch(b.id)).members, 3, "a refused join stored a member");
    const rel = await c.relatives(b.id);
    assert.deepEqual(ids(rel.parents.map((r) => ({ id: r.edge.parent_id }))), ids(members));
    assert.equal((await c.complete(fin.id, fin.token)).state, "succeeded");
  });

  test("on_success: a member that fails for good cancels the finishing job", async () => {
    const queue = unique("bt");
    const b = await c.openBatch({ finisher: { kind: "notify", queue }, on_success: true });
    assert.equal(b.on_success, true);
    const [, bad] = await c.addToBatch(b.id, [
      { kind: "m", queue },
      { kind: "m", queue, max_attempts: 1 },
    ]);
    assert.ok(bad);
    for (const j of await claimAll(queue)) {
      if (j.id === bad.id) await c.fail(j.id, j.token, { error: "no" });
      else await c.complete(j.id, j.token);
    }
    const got = await c.batch(b.id);
    assert.equal(got.finisher.state, "cancelled");
    assert.match(got.finisher.errors.at(-1)?.message ?? "", new RegExp(`\\b${bad.id}\\b`));
    assert.deepEqual([got.sealed, got.succeeded, got.failed], [true, 1, 1]);
    await assert.rejects(c.addToBatch(b.id, [{ kind: "m", queue }]), (e: unknown) => {
      assert.ok(e instanceof InvalidStateError);
      assert.match(e.detail, /cancelled/);
      return true;
    });
    assert.deepEqual(await claimAll(queue), []);
  });

  test("an empty batch runs its finishing job at its seal", async () => {
    const queue = unique("bt");
    const b = await c.openBatch({ finisher: { kind: "notify", queue } }, { traceparent: TRACEPARENT });
    assert.equal(b.finisher.traceparent, TRACEPARENT);
    assert.deepEqual(await claimAll(queue), []);
    assert.equal((await c.sealBatch(b.id)).finisher.state, "pending");
    assert.deepEqual((await claimAll(queue)).map((j) => j.id), [b.id]);
  });

  test("a worker's finishing job reads its own batch", async () => {
    const queue = unique("bt");
    const ctrl = new AbortController();
    let seen: number[] | undefined;
    let ran!: () => void;
    const done = new Promise<void>((r) => (ran = r));
    const worker = new Worker(c, {
      queues: [queue],
      waitMs: 1000,
      opentelemetry: false,
      signal: ctrl.signal,
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      handlers: {
        notify: async (job) => {
          const b = await c.batch(job.id);
          seen = [b.members, b.live, b.succeeded, b.failed];
          ran();
        },
        thumb: (job) => {
          if ((job.payload as { bad?: boolean }).bad) return new Discard("cannot read it");
          return undefined;
        },
      },
    });
    const stopped = worker.run();
    try {
      const b = await c.openBatch({ finisher: { kind: "notify", queue } });
      await c.addToBatch(b.id, [0, 1, 2].map((n) => ({ kind: "thumb", payload: { n }, queue })));
      await c.addToBatch(b.id, [{ kind: "thumb", payload: { bad: true }, queue }]);
      await c.sealBatch(b.id);
      await Promise.race([done, new Promise((_, rej) => setTimeout(() => rej(new Error("the finishing job did not run")), 30_000).unref())]);
      assert.deepEqual(seen, [4, 0, 3, 1]);
    } finally {
      ctrl.abort();
      await stopped;
    }
  });

  test("errors: unknown batches, unique keys, bad input", async () => {
    const queue = unique("bt");
    const b = await c.openBatch({ finisher: { kind: "notify", queue } });
    const [m] = await c.addToBatch(b.id, [{ kind: "m", queue }]);
    assert.ok(m);
    await assert.rejects(c.batch(1e12), NotFoundError);
    await assert.rejects(c.sealBatch(1e12), NotFoundError);
    await assert.rejects(c.addToBatch(1e12, [{ kind: "m" }]), NotFoundError);
    await assert.rejects(c.batch(m.id), NotFoundError, "a member finishes no batch");

    const field = (want: string) => (e: unknown) => {
      assert.ok(e instanceof InvalidInputError);
      assert.equal(e.field, want);
      return true;
    };
    // The types leave unique keys out; a JavaScript caller may still send one.
    const withKey = { kind: "notify", queue, unique_key: unique("k") } as { kind: string };
    await assert.rejects(c.openBatch({ finisher: withKey }), field("finisher.unique_key"));
    await assert.rejects(c.addToBatch(b.id, [{ kind: "m", queue }, { ...withKey, kind: "m" }]), field("jobs[1].unique_key"));
    await assert.rejects(c.openBatch({ finisher: { kind: "notify", priority: 5000 } }), field("finisher.priority"));
    await assert.rejects(c.openBatch({ finisher: { kind: "notify" }, onSuccess: true } as never), field("onSuccess"));
    assert.equal((await c.batch(b.id)).members, 1, "a refused join stored a member");
    assert.equal((await c.listJobs({ queue })).jobs.length, 2, "a refused call stored a job");

    // Refused before anything is sent.
    await assert.rejects(c.addToBatch(b.id, []), TypeError);
    await assert.rejects(c.addToBatch(b.id, { kind: "m" } as never), TypeError);
    await assert.rejects(c.openBatch({} as never), TypeError);
    await assert.rejects(c.openBatch({ finisher: { kind: "notify", run_at: new Date(NaN) } }), RangeError);
    await assert.rejects(c.batch(0), TypeError);
    await assert.rejects(c.sealBatch(1.5), TypeError);
  });
});
