// A graceful stop: a Worker process gets SIGTERM (or SIGINT) while jobs
// run. It claims no more, lets the short jobs finish, releases the long
// ones at its deadline, and exits; then every job is succeeded or pending
// again, none lost (left running) or run twice.

import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { describe, test, type TestContext } from "node:test";

import { Worker, type Job } from "@readpast/client";

import { client, deadline, finished, sleep, unique, waitUntil } from "./support.js";

const c = client();
const script = fileURLToPath(new URL("./stop-worker.js", import.meta.url));

class WorkerProcess {
  readonly proc: ChildProcess;
  readonly out: string[] = [];
  err = "";
  constructor(t: TestContext, queue: string, concurrency: number, shutdownMs: number) {
    this.proc = spawn(process.execPath, [script, queue, String(concurrency), String(shutdownMs)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let buf = "";
    this.proc.stdout?.setEncoding("utf8").on("data", (d: string) => {
      buf += d;
      const lines = buf.split("\n");
      buf = lines.pop() ?? "";
      this.out.push(...lines);
    });
    this.proc.stderr?.setEncoding("utf8").on("data", (d: string) => (this.err += d));
    t.after(() => {
      if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
    });
  }
  ids(word: string): number[] {
    return this.out
      .filter((l) => l.startsWith(word + " "))
      .map((l) => Number(l.split(" ")[1]))
      .sort((a, b) => a - b);
  }
  output(): string {
    return `worker stdout:\n${this.out.join("\n")}\nworker stderr:\n${this.err}`;
  }
}

/** 2 jobs of 300 ms, 2 of 2 minutes, then 3 that a first worker of
 * concurrency 4 does not take (a lower priority runs first, and its slots
 * are full until it stops). */
async function enqueue(queue: string): Promise<Job[]> {
  const specs = [300, 300, 120_000, 120_000].map((ms) => ({ kind: "sleep", queue, payload: { ms } }));
  const waiting = [0, 0, 0].map(() => ({ kind: "sleep", queue, payload: { ms: 0 }, priority: 10 }));
  return c.enqueueMany([...specs, ...waiting]);
}

/** Sends the signals 300 ms apart; resolves with the ms the process took
 * to exit after the first. */
async function signal(w: WorkerProcess, ...sigs: NodeJS.Signals[]): Promise<number> {
  const exited = once(w.proc, "exit");
  const at = Date.now();
  for (const [i, sig] of sigs.entries()) {
    if (i) await sleep(300);
    w.proc.kill(sig);
  }
  const timeout = deadline(45_000).then(() => "timeout");
  const r = await Promise.race([exited, timeout]);
  assert.notEqual(r, "timeout", `the worker did not exit within 45 s\n${w.output()}`);
  assert.deepEqual(r, [0, null], w.output());
  assert.match(w.err, /signal received; stopping/, w.output());
  return Date.now() - at;
}

/** Runs what is left with another worker: exactly the jobs expect, each
 * once; then every job has succeeded. */
async function drain(queue: string, jobs: Job[], expect: number[]): Promise<void> {
  const ran: number[] = [];
  const ctrl = new AbortController();
  const w = new Worker(c, {
    queues: [queue],
    concurrency: 4,
    waitMs: 2000,
    signal: ctrl.signal,
    opentelemetry: false,
    handlers: { sleep: (job) => void ran.push(job.id) },
  });
  const done = w.run();
  try {
    for (const id of expect) assert.equal((await finished(c, id)).state, "succeeded");
  } finally {
    ctrl.abort();
    await done;
  }
  assert.deepEqual(ran.sort((a, b) => a - b), [...expect].sort((a, b) => a - b));
  const states = new Map<number, string>();
  for await (const j of c.iterateJobs({ queue })) states.set(j.id, j.state);
  assert.deepEqual([...states.values()], jobs.map(() => "succeeded"));
}

describe("graceful stop of a worker process", { concurrency: true }, () => {
  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    test(`${sig}: short jobs finish, long ones are released at the deadline, none lost`, async (t) => {
      const queue = unique("stop");
      const jobs = await enqueue(queue);
      const ids = jobs.map((j) => j.id);
      const [short, long, waiting] = [ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)];
      const w = new WorkerProcess(t, queue, 4, 1500);
      await waitUntil(() => w.ids("start").length === 4, "the worker to start 4 jobs", 20_000).catch((e: Error) => {
        throw new Error(`${e.message}\n${w.output()}`);
      });
      assert.deepEqual(w.ids("start"), [...short, ...long].sort((a, b) => a - b));
      const took = await signal(w, sig);
      // It waited for the short jobs, then until its deadline for the long
      // ones, not for them to end (2 minutes; the bound leaves room for a
      // loaded machine).
      assert.ok(took >= 1400 && took < 30_000, `exited ${took} ms after the signal\n${w.output()}`);
      assert.deepEqual(w.ids("end"), short, w.output());
      assert.equal(w.err.split("still running at the shutdown deadline; releasing it").length - 1, 2, w.output());
      const now = Date.now();
      for (const id of short) {
        const j = await c.getJob(id);
        assert.deepEqual([j.state, j.attempt, j.result], ["succeeded", 1, { slept: 300 }], w.output());
      }
      for (const id of long) {
        const j = await c.getJob(id);
        // Released: pending again at once, the attempt not counted.
        assert.deepEqual([j.state, j.attempt, j.errors], ["pending", 0, []], w.output());
        assert.ok(new Date(j.run_at).getTime() <= now);
      }
      for (const id of waiting) {
        const j = await c.getJob(id);
        assert.deepEqual([j.state, j.attempt], ["pending", 0], w.output());
      }
      await drain(queue, jobs, [...long, ...waiting]);
    });
  }

  test("a second signal releases at once", async (t) => {
    const queue = unique("stop");
    const jobs = await enqueue(queue);
    const started = jobs.slice(0, 4).map((j) => j.id);
    const w = new WorkerProcess(t, queue, 4, 60_000);
    await waitUntil(() => w.ids("start").length === 4, "the worker to start 4 jobs", 20_000);
    const took = await signal(w, "SIGTERM", "SIGTERM");
    assert.ok(took < 30_000, `exited ${took} ms after the signal, not after its 60 s shutdown timeout\n${w.output()}`);
    const left: number[] = [];
    for (const id of started) {
      const j = await c.getJob(id);
      // Finished (a short job may end before the second signal), or
      // released; never left running.
      if (j.state === "succeeded") assert.ok(w.ids("end").includes(id), w.output());
      else {
        assert.deepEqual([j.state, j.attempt], ["pending", 0], w.output());
        left.push(id);
      }
    }
    assert.ok(left.length >= 2, w.output());
    await drain(queue, jobs, [...left, ...jobs.slice(4).map((j) => j.id)]);
  });
});
