// The TypeScript conformance driver: speaks the protocol of
// clients/conformance/README.md on standard input and output, carrying out
// each operation with @readpast/client (clients/typescript, built to its
// dist/). Node's standard library besides.
//
//   READPAST_URL=http://127.0.0.1:8080 READPAST_TOKEN=... node driver.mjs
//
// `node driver.mjs worker QUEUE CONCURRENCY SHUTDOWN_SECONDS` runs the
// worker process of the run_worker operation: the package's Worker.

import { spawn } from "node:child_process";
import { constants } from "node:os";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

import { ApiError, Client, NetworkError, VERSION, Worker, shutdownOnSignals } from "../../../typescript/dist/index.js";

const PROTOCOL = "readpast-conformance/1";

/** An error that is not the server's: reported with status 0. */
class DriverError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** An error answer the driver read itself (the raw operation). */
class RawError extends Error {
  constructor(status, code, field, message) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** A time as an RFC 3339 string in UTC (the server's own when it is). */
function timeOut(t) {
  if (t === null || t === undefined) return null;
  if (typeof t === "string" && t.endsWith("Z")) return t;
  return new Date(t).toISOString();
}

/** The job as every driver reports it (README.md, "Operations"). */
function jobOut(j) {
  return {
    id: j.id,
    queue: j.queue,
    kind: j.kind,
    state: j.state,
    priority: j.priority,
    attempt: j.attempt,
    max_attempts: j.max_attempts,
    payload: j.payload ?? null,
    group: j.group ?? null,
    keys: [...(j.keys ?? [])],
    result: j.result ?? null,
    duplicate: j.duplicate ?? false,
    token: j.token || null,
    snoozes: j.snoozes ?? 0,
    worker: j.worker || null,
    tags: [...(j.tags ?? [])],
    errors: (j.errors ?? []).map((e) => ({ attempt: e.attempt, message: e.message })),
    run_at: timeOut(j.run_at),
    lease_expires_at: timeOut(j.lease_expires_at),
    unique_key: j.unique_key || null,
    parent_results: j.parent_results ?? null,
  };
}

function edgeOut(e) {
  return {
    parent_id: e.parent_id,
    child_id: e.child_id,
    parent_ref: e.parent_ref ?? null,
    child_ref: e.child_ref ?? null,
    policy: e.policy,
    state: e.state,
  };
}

const relativesOut = (rs) => rs.map((r) => ({ edge: edgeOut(r.edge), job: r.job ? jobOut(r.job) : null }));

const jobsOut = (jobs) => ({ jobs: jobs.map(jobOut) });

/** The arguments named, undefined for those left out; an unknown one is a
 * mistake in the scenario, as is a required one left out. */
function take(args, required, optional = []) {
  const known = new Set([...required, ...optional]);
  const unknown = Object.keys(args).filter((k) => !known.has(k)).sort();
  if (unknown.length > 0) throw new DriverError("driver_bad_args", `unknown arguments: ${unknown.join(", ")}`);
  for (const r of required) {
    if (!(r in args)) throw new DriverError("driver_bad_args", `missing argument ${r}`);
  }
  return args;
}

const inSeconds = (s) => (s === undefined || s === null ? undefined : new Date(Date.now() + s * 1000));

const SPEC_ARGS = [
  "payload",
  "queue",
  "priority",
  "run_in_seconds",
  "max_attempts",
  "group",
  "unique_key",
  "unique_for_seconds",
  "tags",
  "keys",
];

/** The fields of a flow job and of its edges in `POST /v1/flows`: others
 * are a mistake in the scenario. */
const FLOW_JOB_FIELDS = ["ref", "kind", "payload", "queue", "priority", "run_at", "max_attempts", "group", "keys", "tags", "after"];
const FLOW_EDGE_FIELDS = ["ref", "job_id", "policy"];

/** The fields of a job of a batch: the enqueue fields (the unique key
 * ones go as they are, for the server to refuse). */
const BATCH_JOB_FIELDS = [...FLOW_JOB_FIELDS.filter((f) => f !== "ref" && f !== "after"), "unique_key", "unique_for_seconds"];

/** A job of a batch as the scenario wrote it, passed to the library as it
 * is. */
function batchJob(j, where) {
  if (j === null || typeof j !== "object" || Array.isArray(j)) throw new DriverError("driver_bad_args", `${where} must be an object`);
  const unknown = Object.keys(j).filter((f) => !BATCH_JOB_FIELDS.includes(f));
  if (unknown.length > 0) throw new DriverError("driver_bad_args", `${where}: unknown fields: ${unknown.sort().join(", ")}`);
  return j;
}

const batchOut = (b) => ({
  id: b.id,
  on_success: b.on_success,
  sealed: b.sealed,
  finisher: jobOut(b.finisher),
  members: b.members,
  live: b.live,
  succeeded: b.succeeded,
  failed: b.failed,
  cancelled: b.cancelled,
});

/** A JobSpec of the library from enqueue arguments. */
function specOf(args, extra = []) {
  const a = take(args, ["kind"], [...SPEC_ARGS, ...extra]);
  return {
    kind: a.kind,
    payload: a.payload,
    queue: a.queue,
    priority: a.priority,
    run_at: inSeconds(a.run_in_seconds),
    max_attempts: a.max_attempts,
    group: a.group,
    unique_key: a.unique_key,
    unique_for_seconds: a.unique_for_seconds,
    tags: a.tags,
    keys: a.keys,
  };
}

class Driver {
  constructor(url, token) {
    this.url = url.replace(/\/+$/, "");
    this.token = token;
    this.c = new Client(url, { token });
  }

  async enqueue(args) {
    const spec = specOf(args, ["idempotency_key"]);
    const opts = args.idempotency_key === undefined ? {} : { idempotencyKey: args.idempotency_key };
    return jobOut(await this.c.enqueue(spec, opts));
  }

  async enqueue_batch(args) {
    const { jobs } = take(args, ["jobs"]);
    if (!Array.isArray(jobs)) throw new DriverError("driver_bad_args", "jobs must be a list");
    return jobsOut(await this.c.enqueueMany(jobs.map((j) => specOf(j))));
  }

  /** The body's jobs as they are: enqueueFlow takes the API's flow job
   * fields. */
  async enqueue_flow(args) {
    const { jobs } = take(args, ["jobs"]);
    if (!Array.isArray(jobs)) throw new DriverError("driver_bad_args", "jobs must be a list");
    jobs.forEach((j, i) => {
      if (j === null || typeof j !== "object" || Array.isArray(j)) {
        throw new DriverError("driver_bad_args", `jobs[${i}] must be an object`);
      }
      const unknown = Object.keys(j).filter((f) => !FLOW_JOB_FIELDS.includes(f));
      if (Array.isArray(j.after)) {
        j.after.forEach((e, k) => {
          if (e !== null && typeof e === "object") {
            unknown.push(...Object.keys(e).filter((f) => !FLOW_EDGE_FIELDS.includes(f)).map((f) => `after[${k}].${f}`));
          }
        });
      }
      if (unknown.length > 0) {
        throw new DriverError("driver_bad_args", `jobs[${i}]: unknown fields: ${unknown.sort().join(", ")}`);
      }
    });
    return jobsOut(await this.c.enqueueFlow(jobs));
  }

  async claim(args) {
    const a = take(args, ["worker"], ["queues", "limit", "lease_seconds", "wait_seconds", "parent_results"]);
    return jobsOut(
      await this.c.claim({
        worker: a.worker,
        queues: a.queues,
        limit: a.limit,
        lease_seconds: a.lease_seconds,
        wait_seconds: a.wait_seconds,
        parent_results: a.parent_results,
      }),
    );
  }

  async relatives(args) {
    const a = take(args, ["id"], ["limit"]);
    const rel = await this.c.relatives(a.id, { limit: a.limit });
    return { parents: relativesOut(rel.parents), children: relativesOut(rel.children) };
  }

  async flow_graph(args) {
    const a = take(args, ["id"], ["limit"]);
    const g = await this.c.flowGraph(a.id, { limit: a.limit });
    return { jobs: g.jobs.map(jobOut), edges: g.edges.map(edgeOut), truncated: g.truncated };
  }

  async open_batch(args) {
    const a = take(args, ["finisher"], ["on_success"]);
    return batchOut(await this.c.openBatch({ finisher: batchJob(a.finisher, "finisher"), on_success: a.on_success }));
  }

  async add_to_batch(args) {
    const a = take(args, ["id", "jobs"]);
    if (!Array.isArray(a.jobs)) throw new DriverError("driver_bad_args", "jobs must be a list");
    return jobsOut(await this.c.addToBatch(a.id, a.jobs.map((j, i) => batchJob(j, `jobs[${i}]`))));
  }

  async seal_batch(args) {
    return batchOut(await this.c.sealBatch(take(args, ["id"]).id));
  }

  async batch(args) {
    return batchOut(await this.c.batch(take(args, ["id"]).id));
  }

  async complete(args) {
    const a = take(args, ["id", "token"], ["result"]);
    return jobOut(await this.c.complete(a.id, a.token, a.result));
  }

  async fail(args) {
    const a = take(args, ["id", "token", "error"], ["retry_in_seconds", "discard"]);
    const spec = { error: a.error, retry_at: inSeconds(a.retry_in_seconds), discard: a.discard };
    return jobOut(await this.c.fail(a.id, a.token, spec));
  }

  async heartbeat(args) {
    const a = take(args, ["id", "token"], ["lease_seconds"]);
    const res = await this.c.heartbeat(a.id, a.token, a.lease_seconds);
    return { lease_expires_at: timeOut(res.lease_expires_at) };
  }

  async release(args) {
    const a = take(args, ["id", "token"]);
    return jobOut(await this.c.release(a.id, a.token));
  }

  async snooze(args) {
    const a = take(args, ["id", "token", "seconds"]);
    return jobOut(await this.c.snooze(a.id, a.token, a.seconds));
  }

  async cancel(args) {
    const { id, token } = take(args, ["id"], ["token"]);
    return jobOut(await this.c.cancelJob(id, token === undefined ? {} : { token }));
  }

  async retry(args) {
    return jobOut(await this.c.retryJob(take(args, ["id"]).id));
  }

  async get(args) {
    return jobOut(await this.c.getJob(take(args, ["id"]).id));
  }

  async list(args) {
    const a = take(args, [], ["queue", "state", "kind", "group", "tag", "limit"]);
    const page = await this.c.listJobs({
      queue: a.queue,
      state: a.state,
      kind: a.kind,
      group: a.group,
      tag: a.tag,
      limit: a.limit,
    });
    return { jobs: page.jobs.map(jobOut), next_cursor: page.next_cursor ?? null };
  }

  /** A request as the scenario wrote it, for bad input the library would
   * not send: fetch, not the library. */
  async raw(args) {
    const a = take(args, ["method", "path"], ["headers", "body", "body_json", "pad"]);
    let body;
    if (a.body !== undefined && a.body !== null) {
      body = a.body;
      if (a.pad !== undefined && a.pad !== null) body = body.replace(a.pad.marker, () => a.pad.unit.repeat(a.pad.count));
    } else if (a.body_json !== undefined) {
      body = JSON.stringify(a.body_json);
    }
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (this.token) headers["Authorization"] = "Bearer " + this.token;
    Object.assign(headers, a.headers ?? {});
    let res, text;
    try {
      res = await fetch(this.url + a.path, { method: a.method, headers, body, signal: AbortSignal.timeout(60_000) });
      text = await res.text();
    } catch (e) {
      throw new NetworkError(`${a.method} ${a.path}: ${e.message}`, { cause: e });
    }
    let parsed = null;
    try {
      if (text !== "") parsed = JSON.parse(text);
    } catch {
      if (res.ok) throw new DriverError("driver_error", `the answer is not JSON: ${text.slice(0, 300)}`);
    }
    if (!res.ok) {
      const err = parsed?.error;
      if (err && typeof err.code === "string") {
        throw new RawError(res.status, err.code, typeof err.field === "string" ? err.field : null, String(err.message ?? ""));
      }
      throw new RawError(res.status, "http_error", null, text.trim().slice(0, 500));
    }
    return { status: res.status, body: parsed };
  }

  async long_poll(args) {
    const a = take(args, ["worker", "queue", "kind", "wait_seconds", "enqueue_after_seconds"], ["lease_seconds"]);
    let got;
    const claimed = this.c
      .claim({ worker: a.worker, queues: [a.queue], wait_seconds: a.wait_seconds, lease_seconds: a.lease_seconds })
      .then(
        (jobs) => (got = { jobs, at: performance.now() }),
        (error) => (got = { error, at: performance.now() }),
      );
    await Promise.race([claimed, sleep(a.enqueue_after_seconds * 1000)]);
    if (got !== undefined) {
      throw new DriverError("driver_error", `the claim answered before the enqueue: ${got.error ?? JSON.stringify(got.jobs)}`);
    }
    const sent = performance.now();
    const job = await this.c.enqueue({ kind: a.kind, queue: a.queue });
    const answered = performance.now();
    const timeout = new AbortController();
    await Promise.race([claimed, sleep((a.wait_seconds + 30) * 1000, undefined, { signal: timeout.signal }).catch(() => {})]);
    timeout.abort();
    if (got === undefined) throw new DriverError("driver_error", "the claim did not answer");
    if (got.error !== undefined) throw got.error;
    return { jobs: got.jobs.map(jobOut), enqueued_id: job.id, enqueue_ms: answered - sent, wake_ms: got.at - answered };
  }

  async run_worker(args) {
    const a = take(args, ["queue", "concurrency", "shutdown_seconds", "wait_started"], ["signal"]);
    const sig = a.signal ?? "SIGTERM";
    if (sig !== "SIGTERM" && sig !== "SIGINT") throw new DriverError("driver_bad_args", "signal must be SIGTERM or SIGINT");
    const proc = spawn(
      process.execPath,
      [fileURLToPath(import.meta.url), "worker", a.queue, String(a.concurrency), String(a.shutdown_seconds)],
      { stdio: ["pipe", "pipe", "pipe"] },
    );
    const outClosed = new Promise((resolve) => proc.stdout.once("close", resolve));
    const lines = [];
    const errs = [];
    createInterface({ input: proc.stdout }).on("line", (l) => lines.push(l.trim()));
    proc.stderr.setEncoding("utf8").on("data", (d) => errs.push(d));
    let exit;
    const exited = new Promise((resolve) => {
      proc.on("exit", (code, signal) => {
        exit = { code, signal, at: performance.now() };
        resolve();
      });
      proc.on("error", (error) => {
        exit = { code: null, signal: null, error, at: performance.now() };
        resolve();
      });
    });
    const ids = (word) =>
      lines
        .filter((l) => l.startsWith(word + " "))
        .map((l) => Number(l.split(" ")[1]))
        .sort((x, y) => x - y);
    let took;
    try {
      const deadline = performance.now() + 30_000;
      while (ids("start").length < a.wait_started) {
        if (exit !== undefined) {
          throw new DriverError("driver_error", `the worker exited before starting ${a.wait_started} jobs:\n${errs.join("")}`);
        }
        if (performance.now() > deadline) {
          throw new DriverError("driver_error", `the worker did not start ${a.wait_started} jobs within 30s:\n${errs.join("")}`);
        }
        await sleep(10);
      }
      const signalled = performance.now();
      proc.kill(sig);
      const timeout = new AbortController();
      await Promise.race([exited, sleep(60_000, undefined, { signal: timeout.signal }).catch(() => {})]);
      timeout.abort();
      if (exit === undefined) {
        throw new DriverError("driver_error", `the worker did not exit within 60s of the signal:\n${errs.join("")}`);
      }
      took = exit.at - signalled;
    } finally {
      if (exit === undefined) {
        proc.kill("SIGKILL");
        await exited;
      }
      proc.stdin.end();
    }
    // The last lines may still be in the pipe when the exit is reported.
    await outClosed;
    const code = exit.code ?? 128 + (constants.signals[exit.signal] ?? 0);
    if (code !== 0) process.stderr.write(`worker exited with ${exit.code ?? exit.signal}; its stderr:\n${errs.join("")}`);
    return { exit_code: code, started: ids("start"), ended: ids("end"), took_ms: Math.round(took) };
  }
}

function errorOut(e) {
  if (e instanceof ApiError) return { status: e.status, code: e.code, field: e.field ?? null, message: e.detail };
  if (e instanceof RawError) return { status: e.status, code: e.code, field: e.field, message: e.message };
  if (e instanceof DriverError) return { status: 0, code: e.code, field: null, message: e.message };
  if (e instanceof NetworkError) return { status: 0, code: "transport_error", field: null, message: e.message };
  // The library refused the input before sending it.
  if (e instanceof TypeError || e instanceof RangeError) {
    return { status: 0, code: "client_error", field: null, message: `${e.name}: ${e.message}` };
  }
  return { status: 0, code: "driver_error", field: null, message: String(e?.stack ?? e) };
}

const send = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

async function serve() {
  const d = new Driver(process.env.READPAST_URL ?? "", process.env.READPAST_TOKEN || undefined);
  send({ hello: PROTOCOL, driver: "typescript", library: `@readpast/client ${VERSION}` });
  const ops = Object.getOwnPropertyNames(Driver.prototype).filter((n) => n !== "constructor");
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === "") continue;
    const req = JSON.parse(line);
    try {
      if (!ops.includes(req.op)) throw new DriverError("unsupported_op", `the TypeScript driver has no operation ${JSON.stringify(req.op)}`);
      send({ seq: req.seq, ok: true, value: await d[req.op](req.args ?? {}) });
    } catch (e) {
      // Every error is an outcome for the runner to judge.
      send({ seq: req.seq, ok: false, error: errorOut(e) });
    }
  }
  return 0;
}

/** The package's Worker running "sleep" jobs (payload {"seconds": s}),
 * printing "start ID" and "end ID", until SIGTERM or SIGINT. */
async function worker(queue, concurrency, shutdownSeconds) {
  const say = (line) => process.stdout.write(line + "\n");
  const log = (line) => process.stderr.write(`${new Date().toISOString()} ${line}\n`);
  // Standard input ends when the driver does, however it ends: the worker
  // does not outlive it.
  process.stdin.on("end", () => {
    log("worker: the driver went away; exiting");
    process.exit(3);
  });
  process.stdin.resume();
  const stop = shutdownOnSignals();
  const w = new Worker(new Client(process.env.READPAST_URL ?? "", { token: process.env.READPAST_TOKEN || undefined }), {
    queues: [queue],
    concurrency: Number(concurrency),
    shutdownTimeoutMs: Number(shutdownSeconds) * 1000,
    waitMs: 5000,
    leaseMs: 30_000,
    signal: stop.signal,
    logger: { info: log, warn: log, error: log },
    handlers: {
      // Like a handler that does not look at its signal: the stop must
      // release it.
      sleep: async (job) => {
        const seconds = Number(job.payload.seconds);
        say(`start ${job.id}`);
        await sleep(seconds * 1000);
        say(`end ${job.id}`);
        return { slept: job.payload.seconds };
      },
    },
  });
  await w.run();
  stop.dispose();
  log(`worker: stopped: ${JSON.stringify(w.counts)}`);
  // Handlers still sleeping were released: do not wait for them.
  return 0;
}

const argv = process.argv.slice(2);
let code;
try {
  code = argv[0] === "worker" ? await worker(argv[1], argv[2], argv[3]) : await serve();
} catch (e) {
  process.stderr.write(`driver: ${e?.stack ?? e}\n`);
  code = 1;
}
process.exit(code);
