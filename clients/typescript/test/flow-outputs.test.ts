// Flow outputs and inspection against a real `readpast serve`: a child's
// parents' results over the claim and in a Worker's handler,
// Client.relatives and Client.flowGraph.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { NotFoundError, Worker, type Job } from "@readpast/client";

import { client, unique } from "./support.js";

const c = client();

/** A flow of three: extract, flaky (one attempt), and report after both
 * (run_anyway on flaky). */
async function threeJobs(queue: string): Promise<Job[]> {
  return c.enqueueFlow([
    { ref: "extract", kind: "extract", queue },
    { ref: "flaky", kind: "flaky", queue, max_attempts: 1 },
    { kind: "report", queue, after: [{ ref: "extract" }, { ref: "flaky", policy: "run_anyway" }] },
  ]);
}

describe("flow outputs", () => {
  test("a claim with parent_results carries the parents' results by ref", async () => {
    const queue = unique("fo");
    const [extract, flaky, report] = await threeJobs(queue);
    assert.ok(extract && flaky && report);
    const parents = await c.claim({ worker: "ts-fo", queues: [queue], limit: 2, parent_results: true });
    assert.deepEqual(parents.map((j) => j.id).sort((a, b) => a - b), [extract.id, flaky.id]);
    assert.deepEqual(parents.map((j) => j.parent_results), [undefined, undefined]);
    for (const j of parents) {
      if (j.id === extract.id) await c.complete(j.id, j.token, { rows: 3 });
      else await c.fail(j.id, j.token, { error: "boom" });
    }
    const [child] = await c.claim({ worker: "ts-fo", queues: [queue], parent_results: true });
    assert.equal(child?.id, report.id);
    assert.deepEqual(child?.parent_results, { extract: { rows: 3 }, flaky: null });
  });

  test("a claim without it reads nothing more", async () => {
    const queue = unique("fo");
    const [, child] = await c.enqueueFlow([
      { ref: "p", kind: "p", queue },
      { kind: "c", queue, after: [{ ref: "p" }] },
    ]);
    const [p] = await c.claim({ worker: "ts-fo", queues: [queue] });
    assert.ok(p && child);
    await c.complete(p.id, p.token, 1);
    const [got] = await c.claim({ worker: "ts-fo", queues: [queue] });
    assert.equal(got?.id, child.id);
    assert.equal("parent_results" in (got ?? {}), false);
  });

  test("a worker made with parentResults hands them to the handler", async () => {
    const queue = unique("fo");
    const ctrl = new AbortController();
    let seen: unknown;
    let ran!: () => void;
    const done = new Promise<void>((r) => (ran = r));
    const worker = new Worker(c, {
      queues: [queue],
      waitMs: 1000,
      parentResults: true,
      opentelemetry: false,
      signal: ctrl.signal,
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      handlers: {
        extract: () => ({ rows: 3 }),
        flaky: () => {
          throw new Error("flaky fails for good");
        },
        report: (job) => {
          seen = job.parent_results;
          ran();
        },
      },
    });
    const stopped = worker.run();
    try {
      await threeJobs(queue);
      await Promise.race([done, new Promise((_, rej) => setTimeout(() => rej(new Error("the child did not run")), 30_000))]);
      assert.deepEqual(seen, { extract: { rows: 3 }, flaky: null });
    } finally {
      ctrl.abort();
      await stopped;
    }
  });

  test("relatives and flowGraph", async () => {
    const queue = unique("fo");
    const [extract, flaky, report] = await threeJobs(queue);
    assert.ok(extract && flaky && report);
    const rel = await c.relatives(report.id);
    assert.deepEqual(rel.children, []);
    assert.deepEqual(
      rel.parents.map((r) => [r.edge.parent_id, r.edge.parent_ref, r.edge.policy, r.edge.state, r.job?.state]),
      [
        [extract.id, "extract", "cancel_child", "open", "pending"],
        [flaky.id, "flaky", "run_anyway", "open", "pending"],
      ],
    );
    const one = await c.relatives(extract.id, { limit: 1 });
    assert.deepEqual(one.children.map((r) => [r.edge.child_id, r.job?.state]), [[report.id, "blocked"]]);

    const g = await c.flowGraph(extract.id);
    assert.deepEqual(g.jobs.map((j) => j.id), [extract.id, report.id, flaky.id]);
    assert.equal(g.edges.length, 2);
    assert.equal(g.truncated, false);
    const cut = await c.flowGraph(extract.id, { limit: 2 });
    assert.deepEqual(cut.jobs.map((j) => j.id), [extract.id, report.id]);
    assert.deepEqual(cut.edges.map((e) => [e.parent_id, e.child_id]), [[extract.id, report.id]]);
    assert.equal(cut.truncated, true);

    await assert.rejects(c.relatives(1e12), NotFoundError);
    await assert.rejects(c.flowGraph(1e12), NotFoundError);
    await assert.rejects(c.relatives(report.id, { limit: 0 }), RangeError);
    await assert.rejects(c.flowGraph(report.id, { limit: 2001 }), RangeError);
  });
});
