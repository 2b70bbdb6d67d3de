// The Client against a real `readpast serve`: every operation, with the
// answers checked field by field.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { InvalidStateError, NotFoundError, StaleClaimError, type Job } from "@readpast/client";

import { client, sleep, unique } from "./support.js";

const c = client();

describe("server", () => {
  test("info, healthy, ready, openapi", async () => {
    const info = await c.info();
    assert.equal(info.name, "readpast");
    assert.equal(typeof info.version, "string");
    assert.equal(await c.healthy(), true);
    assert.equal(await c.ready(), true);
    const doc = await c.openapi();
    assert.equal(doc["openapi"], "3.1.0");
  });
});

describe("enqueue", () => {
  test("every option of the API", async () => {
    const queue = unique("q");
    const runAt = new Date(Date.now() + 3_600_000);
    const j = await c.enqueue({
      kind: "email",
      payload: { to: "a@example.com", n: [1, 2] },
      queue,
      priority: -5,
      run_at: runAt,
      max_attempts: 3,
      group: "customer:42",
      unique_key: unique("uk"),
      unique_for_seconds: 60,
      tags: ["t1", "t2"],
    });
    assert.equal(j.state, "pending");
    assert.equal(j.kind, "email");
    assert.deepEqual(j.payload, { to: "a@example.com", n: [1, 2] });
    assert.equal(j.queue, queue);
    assert.equal(j.priority, -5);
    assert.equal(new Date(j.run_at).getTime(), runAt.getTime());
    assert.equal(j.max_attempts, 3);
    assert.equal(j.group, "customer:42");
    assert.ok(j.unique_until, "a unique_for_seconds gives unique_until");
    assert.deepEqual(j.tags, ["t1", "t2"]);
    assert.equal(j.attempt, 0);
    assert.equal(j.duplicate, undefined);
  });

  test("keys: enqueued, read back and claimed; five are a 400", async () => {
    const queue = unique("q");
    const a = unique("key-a");
    const b = unique("key-b");
    const j: Job = await c.enqueue({ kind: "sync", queue, payload: { n: 1 }, keys: [a, b] });
    assert.equal(j.group, a);
    assert.deepEqual(j.keys, [a, b]);
    assert.deepEqual((await c.getJob(j.id)).keys, [a, b]);
    const many = await c.enqueueMany([
      { kind: "sync", queue, group: b, keys: [b, a] },
      { kind: "sync", queue, keys: [a] },
      { kind: "plain", queue },
    ]);
    assert.deepEqual(
      many.map((m) => [m.group, m.keys]),
      [
        [b, [b, a]],
        [a, [a]],
        [null, undefined],
      ],
    );
    const claimed = await c.claim({ worker: "w", queues: [queue], limit: 1 });
    assert.deepEqual(
      claimed.map((m) => [m.id, m.keys]),
      [[j.id, [a, b]]],
    );
    await assert.rejects(c.enqueue({ kind: "sync", queue, keys: ["k1", "k2", "k3", "k4", "k5"] }), (e: unknown) => {
      const err = e as { name: string; status: number; code: string; field: string };
      assert.deepEqual([err.name, err.status, err.code, err.field], ["InvalidFieldError", 400, "invalid_field", "keys"]);
      return true;
    });
    await assert.rejects(
      c.enqueueMany([
        { kind: "ok", queue },
        { kind: "bad", queue, group: "x", keys: ["y"] },
      ]),
      (e: unknown) => (e as { field: string }).field === "jobs[1].keys",
    );
    assert.equal((await c.listJobs({ queue })).jobs.length, 4);
  });

  test("defaults, and run_at as a string", async () => {
    const j = await c.enqueue({ kind: "plain", run_at: "2020-01-01T00:00:00Z" });
    assert.equal(j.queue, "default");
    assert.deepEqual(j.payload, {});
    assert.equal(j.priority, 0);
    assert.equal(j.max_attempts, 25);
    assert.equal(j.group, null);
    assert.equal(j.run_at, "2020-01-01T00:00:00Z");
    await c.cancelJob(j.id); // not for anyone's default queue
  });

  test("a held unique key is a duplicate, not a new job", async () => {
    const key = unique("once");
    const queue = unique("q");
    const a = await c.enqueue({ kind: "k", queue, unique_key: key });
    const b = await c.enqueue({ kind: "k", queue, unique_key: key, payload: { other: true } });
    assert.equal(b.duplicate, true);
    assert.equal(b.id, a.id);
    assert.deepEqual(b.payload, {});
  });

  test("the Idempotency-Key header", async () => {
    const key = unique("idem");
    const queue = unique("q");
    const a = await c.enqueue({ kind: "k", queue }, { idempotencyKey: key });
    assert.equal(a.unique_key, `idempotency:${key}`);
    const b = await c.enqueue({ kind: "k", queue }, { idempotencyKey: key });
    assert.equal(b.duplicate, true);
    assert.equal(b.id, a.id);
  });

  test("trace context goes as headers", async () => {
    const seen: Headers[] = [];
    const spy = client({
      fetch: (input, init) => {
        seen.push(new Headers(init?.headers));
        return fetch(input, init);
      },
    });
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    await spy.enqueue({ kind: "traced", queue: unique("q") }, { traceparent, tracestate: "vendor=1" });
    await spy.enqueueMany([{ kind: "traced", queue: unique("q") }], { traceparent });
    await spy.enqueue({ kind: "untraced", queue: unique("q") });
    assert.equal(seen[0]?.get("traceparent"), traceparent);
    assert.equal(seen[0]?.get("tracestate"), "vendor=1");
    assert.equal(seen[1]?.get("traceparent"), traceparent);
    assert.equal(seen[2]?.get("traceparent"), null);
    assert.equal(seen[0]?.get("authorization")?.startsWith("Bearer "), true);
  });

  test("many at once, in order; a bad entry enqueues none", async () => {
    const queue = unique("q");
    const jobs = await c.enqueueMany([
      { kind: "a", queue, payload: { i: 0 } },
      { kind: "b", queue, payload: { i: 1 }, priority: 10, run_at: new Date(Date.now() + 60_000) },
      { kind: "c", queue, payload: { i: 2 }, tags: ["x"] },
    ]);
    assert.deepEqual(
      jobs.map((j) => [j.kind, (j.payload as { i: number }).i]),
      [
        ["a", 0],
        ["b", 1],
        ["c", 2],
      ],
    );
    assert.equal(jobs[1]?.priority, 10);
    const bad = unique("q");
    await assert.rejects(
      c.enqueueMany([
        { kind: "ok", queue: bad },
        { kind: "has space", queue: bad },
      ]),
      (e: unknown) => {
        assert.equal((e as { name: string }).name, "InvalidFieldError");
        assert.equal((e as { field: string }).field, "jobs[1].kind");
        return true;
      },
    );
    assert.equal((await c.listJobs({ queue: bad })).jobs.length, 0);
  });
});

describe("jobs", () => {
  test("get, and a missing job", async () => {
    const j = await c.enqueue({ kind: "get", queue: unique("q") });
    const got = await c.getJob(j.id);
    assert.deepEqual(got, j);
    await assert.rejects(c.getJob(2 ** 50), (e: unknown) => {
      assert.ok(e instanceof NotFoundError);
      assert.equal(e.status, 404);
      assert.equal(e.code, "not_found");
      return true;
    });
    await assert.rejects(c.getJob(0), TypeError);
  });

  test("list with filters, pages and the cursor", async () => {
    const queue = unique("q");
    const tag = unique("tag");
    const made: Job[] = [];
    for (let i = 0; i < 5; i++) made.push(await c.enqueue({ kind: "list", queue, payload: { i }, tags: [tag] }));
    await c.enqueue({ kind: "other", queue });
    const ids = made.map((j) => j.id).reverse(); // newest first

    const first = await c.listJobs({ queue, kind: "list", limit: 2 });
    assert.deepEqual(
      first.jobs.map((j) => j.id),
      ids.slice(0, 2),
    );
    assert.equal(typeof first.next_cursor, "string");
    const second = await c.listJobs({ queue, kind: "list", limit: 2, cursor: first.next_cursor });
    assert.deepEqual(
      second.jobs.map((j) => j.id),
      ids.slice(2, 4),
    );

    const pages: number[][] = [];
    for await (const page of c.listJobPages({ queue, kind: "list", limit: 2 })) pages.push(page.jobs.map((j) => j.id));
    assert.deepEqual(pages, [ids.slice(0, 2), ids.slice(2, 4), ids.slice(4)]);

    const all: number[] = [];
    for await (const j of c.iterateJobs({ tag, limit: 3 })) all.push(j.id);
    assert.deepEqual(all, ids);

    const summaries = await c.listJobs({ queue, state: "pending", summary: true });
    assert.equal(summaries.jobs.length, 6);
    assert.equal("payload" in (summaries.jobs[0] ?? {}), false);
    assert.equal(summaries.next_cursor, null);
  });

  test("cancel, retry, run now, delete", async () => {
    const queue = unique("q");
    const later = await c.enqueue({ kind: "k", queue, run_at: new Date(Date.now() + 3_600_000) });
    const due = await c.runJob(later.id);
    assert.equal(due.state, "pending");
    assert.ok(new Date(due.run_at).getTime() <= Date.now() + 1000);

    const cancelled = await c.cancelJob(later.id);
    assert.equal(cancelled.state, "cancelled");
    await assert.rejects(c.cancelJob(later.id), InvalidStateError);
    await assert.rejects(c.runJob(later.id), InvalidStateError);
    const retried = await c.retryJob(later.id);
    assert.equal(retried.state, "pending");
    await assert.rejects(c.deleteJob(later.id), InvalidStateError); // pending
    await c.cancelJob(later.id);
    assert.equal(await c.deleteJob(later.id), undefined);
    await assert.rejects(c.getJob(later.id), NotFoundError);
  });

  test("bulk cancel, retry and delete", async () => {
    const queue = unique("q");
    const tag = unique("bulk");
    await c.enqueueMany([0, 1, 2].map(() => ({ kind: "b", queue, tags: [tag] })));
    await c.enqueue({ kind: "b", queue }); // untagged: untouched
    assert.deepEqual(await c.bulkCancel({ tag }), { count: 3, skipped: [] });
    assert.equal((await c.bulkRetry({ tag, state: "cancelled" })).count, 3);
    assert.equal((await c.bulkCancel({ queue, tag })).count, 3);
    assert.equal((await c.bulkDelete({ tag })).count, 3);
    assert.deepEqual(
      (await c.listJobs({ queue })).jobs.map((j) => j.state),
      ["pending"],
    );
    await assert.rejects(c.bulkDelete({}), (e: unknown) => (e as { code: string }).code === "invalid_field");
  });
});

describe("queues and stats", () => {
  test("queues, pause, resume, stats", async () => {
    const queue = unique("q");
    await c.enqueueMany([{ kind: "s", queue }, { kind: "s", queue }]);
    const paused = await c.pauseQueue(queue);
    assert.equal(paused.name, queue);
    assert.equal(paused.paused, true);
    assert.equal(typeof paused.paused_at, "string");
    assert.equal(paused.counts.pending, 2);
    const claimed = await c.claim({ worker: "w", queues: [queue], limit: 5 });
    assert.equal(claimed.length, 0, "a paused queue gives nothing");
    const listed = (await c.queues()).find((q) => q.name === queue);
    assert.equal(listed?.paused, true);
    const stats = await c.stats();
    assert.ok(stats.paused.includes(queue));
    assert.equal(stats.queues[queue]?.pending, 2);
    assert.ok(stats.totals.pending >= 2);
    const resumed = await c.resumeQueue(queue);
    assert.equal(resumed.paused, false);
    assert.equal(resumed.paused_at, null);
    assert.equal((await c.claim({ worker: "w", queues: [queue], limit: 5 })).length, 2);
  });

  test("a queue named . or .. is reached, not taken for a folder; through fetch, refused with nothing sent", async () => {
    for (const name of [".", ".."]) {
      const paused = await c.pauseQueue(name);
      assert.equal(paused.name, name);
      assert.equal(paused.paused, true);
      const resumed = await c.resumeQueue(name);
      assert.equal(resumed.name, name);
      assert.equal(resumed.paused, false);
    }
    const viaFetch = client({ fetch: globalThis.fetch });
    await assert.rejects(viaFetch.pauseQueue(".."), (e: unknown) => e instanceof TypeError && /cannot be sent through fetch/.test(e.message));
    assert.ok(!(await c.stats()).paused.includes(".."), "the refused pause was not sent");
  });
});

describe("schedules", () => {
  test("put, list, get, pause, resume, run, delete", async () => {
    const name = unique("nightly");
    const queue = unique("q");
    const s = await c.putSchedule(name, {
      cron: "0 3 * * *",
      time_zone: "Europe/Paris",
      catch_up: "once",
      job: { kind: "report", queue, payload: { full: true }, priority: 3, max_attempts: 2 },
    });
    assert.equal(s.name, name);
    assert.equal(s.cron, "0 3 * * *");
    assert.equal(s.time_zone, "Europe/Paris");
    assert.equal(s.catch_up, "once");
    assert.equal(s.paused, false);
    assert.equal(typeof s.next_run_at, "string");
    assert.deepEqual(s.job.payload, { full: true });

    assert.ok((await c.listSchedules()).some((x) => x.name === name));
    const got = await c.getSchedule(name);
    assert.deepEqual(got.runs ?? [], [], "no ticks yet");

    const paused = await c.pauseSchedule(name);
    assert.equal(paused.paused, true);
    assert.equal(paused.next_run_at, null);
    const job = await c.runSchedule(name);
    assert.equal(job.kind, "report");
    assert.equal(job.queue, queue);
    assert.equal(job.priority, 3);
    assert.equal(job.max_attempts, 2);
    assert.equal((await c.getSchedule(name)).paused, true, "a manual run leaves it paused");
    assert.equal((await c.resumeSchedule(name)).paused, false);

    await c.deleteSchedule(name);
    await assert.rejects(c.getSchedule(name), NotFoundError);
    await assert.rejects(c.deleteSchedule(name), NotFoundError);
    await assert.rejects(
      c.putSchedule(unique("bad"), { cron: "not a cron", job: { kind: "k" } }),
      (e: unknown) => (e as { field: string }).field === "cron",
    );
  });
});

describe("limits", () => {
  test("put, list, get, take tokens, delete", async () => {
    const key = `${unique("api")}:stripe/v1`; // a "/" is escaped in the path
    const limit = await c.putLimit(key, { concurrency: 2, rate: 1, per_seconds: 60, burst: 2 });
    assert.deepEqual(limit, { key, concurrency: 2, rate: 1, per_seconds: 60, burst: 2, weight: 1 });
    const template = `${unique("customer")}:*`;
    assert.equal((await c.putLimit(template, { weight: 3 })).weight, 3);

    const listed = await c.listLimits();
    assert.ok(listed.some((l) => l.key === key));
    const got = await c.getLimit(key);
    assert.equal(got.key, key);
    assert.ok(Array.isArray(got.keys));

    assert.deepEqual(await c.takeTokens(key, 2), { granted: true, retry_at: null });
    const refused = await c.takeTokens(key);
    assert.equal(refused.granted, false);
    assert.ok(new Date(refused.retry_at ?? 0).getTime() > Date.now());
    await assert.rejects(c.takeTokens(key, 3), (e: unknown) => (e as { field: string }).field === "n");

    await c.deleteLimit(key);
    await c.deleteLimit(template);
    await assert.rejects(c.getLimit(key), NotFoundError);
  });
});

describe("working on jobs", () => {
  test("claim with a long poll, heartbeat, complete", async () => {
    const queue = unique("q");
    const started = Date.now();
    const claiming = c.claim({ worker: "w1", queues: [queue], wait_seconds: 10, lease_seconds: 30 });
    await sleep(300);
    const made = await c.enqueue({ kind: "k", queue, payload: { x: 1 } });
    const [job, ...rest] = await claiming;
    assert.equal(rest.length, 0);
    assert.ok(job);
    assert.ok(Date.now() - started < 5000, "the long poll answered when the job came");
    assert.equal(job.id, made.id);
    assert.equal(job.state, "running");
    assert.equal(job.attempt, 1);
    assert.equal(job.worker, "w1");
    assert.equal(typeof job.token, "string");

    const beat = await c.heartbeat(job.id, job.token, 120);
    assert.equal(beat.id, job.id);
    assert.ok(new Date(beat.lease_expires_at).getTime() > Date.now() + 100_000);

    const done = await c.complete(job.id, job.token, { sum: 6 });
    assert.equal(done.state, "succeeded");
    assert.deepEqual(done.result, { sum: 6 });
    // Completing again with the same token changes nothing.
    assert.equal((await c.complete(job.id, job.token, { sum: 6 })).state, "succeeded");
  });

  test("complete many at once; each completion succeeds or fails alone", async () => {
    const queue = unique("q");
    await c.enqueueMany([{ kind: "k", queue }, { kind: "k", queue }, { kind: "k", queue }]);
    const [a, b, d] = await c.claim({ worker: "w", queues: [queue], limit: 3 });
    assert.ok(a && b && d);
    const results = await c.completeMany([
      { id: a.id, token: a.token, result: { n: 1 } },
      { id: b.id, token: "not-the-token" },
      { id: d.id, token: d.token },
    ]);
    assert.deepEqual(
      results.map((r) => [r.id, r.ok, r.error?.code]),
      [
        [a.id, true, undefined],
        [b.id, false, "stale_token"],
        [d.id, true, undefined],
      ],
    );
    assert.deepEqual((await c.getJob(a.id)).result, { n: 1 });
    assert.equal((await c.getJob(b.id)).state, "running");
    assert.equal((await c.getJob(d.id)).state, "succeeded");
    await assert.rejects(c.completeMany([]), TypeError);
  });

  test("an empty long poll ends with no jobs", async () => {
    const started = Date.now();
    assert.deepEqual(await c.claim({ worker: "w", queues: [unique("q")], wait_seconds: 0.3 }), []);
    assert.ok(Date.now() - started >= 250);
  });

  test("a stale token is StaleClaimError and changes nothing", async () => {
    const queue = unique("q");
    await c.enqueue({ kind: "k", queue });
    const [job] = await c.claim({ worker: "w", queues: [queue] });
    assert.ok(job);
    const before = await c.getJob(job.id);
    for (const call of [
      () => c.complete(job.id, "not-the-token", { r: 1 }),
      () => c.fail(job.id, "not-the-token", { error: "x" }),
      () => c.heartbeat(job.id, "not-the-token"),
      () => c.release(job.id, "not-the-token"),
      () => c.snooze(job.id, "not-the-token", 10),
    ]) {
      await assert.rejects(call(), (e: unknown) => {
        assert.ok(e instanceof StaleClaimError, String(e));
        assert.equal(e.status, 409);
        assert.equal(e.code, "stale_token");
        return true;
      });
    }
    assert.deepEqual(await c.getJob(job.id), before);
    await c.release(job.id, job.token);
  });

  test("fail with a stack and a retry time, then fail for good", async () => {
    const queue = unique("q");
    await c.enqueue({ kind: "k", queue, max_attempts: 5 });
    const [job] = await c.claim({ worker: "w", queues: [queue] });
    assert.ok(job);
    const retryAt = new Date(Date.now() + 3_600_000);
    const failed = await c.fail(job.id, job.token, { error: "boom", stack: "at here", retry_at: retryAt });
    assert.equal(failed.state, "pending");
    assert.equal(new Date(failed.run_at).getTime(), retryAt.getTime());
    assert.equal(failed.errors[0]?.message, "boom");
    assert.equal(failed.errors[0]?.stack, "at here");
    await c.runJob(job.id);
    const [again] = await c.claim({ worker: "w", queues: [queue] });
    assert.ok(again);
    const gone = await c.fail(again.id, again.token, { error: "bad input", discard: true });
    assert.equal(gone.state, "failed");
    assert.equal(gone.errors.length, 2);
  });

  test("release and snooze", async () => {
    const queue = unique("q");
    await c.enqueue({ kind: "k", queue });
    const [job] = await c.claim({ worker: "w", queues: [queue] });
    assert.ok(job);
    const released = await c.release(job.id, job.token);
    assert.equal(released.state, "pending");
    assert.equal(released.attempt, 0);
    const [again] = await c.claim({ worker: "w", queues: [queue] });
    assert.ok(again);
    const snoozed = await c.snooze(again.id, again.token, 600);
    assert.equal(snoozed.state, "pending");
    assert.equal(snoozed.snoozes, 1);
    assert.ok(new Date(snoozed.run_at).getTime() > Date.now() + 500_000);
  });

  test("a short lease expires without heartbeats", async () => {
    const queue = unique("q");
    await c.enqueue({ kind: "k", queue });
    const [job] = await c.claim({ worker: "w", queues: [queue], lease_seconds: 0.3 });
    assert.ok(job);
    await sleep(3000); // ten leases: the server's rescue, every quarter second, has run on a loaded machine too
    await assert.rejects(c.complete(job.id, job.token), StaleClaimError);
    assert.equal((await c.getJob(job.id)).state, "pending");
  });
});
