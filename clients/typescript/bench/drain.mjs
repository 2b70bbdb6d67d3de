// Drains a backlog of no-op jobs with one Worker and prints the rate.
//
//   npm run build
//   READPAST_URL=http://127.0.0.1:8080 READPAST_TOKEN=... \
//     node bench/drain.mjs [--jobs 20000] [--batch 1000] [--concurrency 200]
//
// It enqueues --jobs jobs of kind "noop" on a queue of its own, in batches
// of --batch (4 batches in flight), then starts one Worker with
// --concurrency slots and times it from its start until every job has
// succeeded. Prints one JSON line: {"jobs", "seconds", "jobs_per_second",
// "enqueue_per_second", ...}.
//
// With --rate R it measures latency instead: the worker waits on an empty
// queue while jobs are enqueued one by one, R a second for --seconds (from
// eight concurrent loops in a child process, or in this one with
// --enqueuer inline; with --enqueuer none the jobs, of kind "noop" with a
// payload {"t": seconds since the epoch}, come from another program
// enqueuing into --queue, such as the Python client's bench/drain.py), and
// it prints the percentiles of enqueue-to-start:
// the handler's clock minus the enqueuer's (one machine), from the
// enqueue's call and from its return. Prints one JSON line: {"jobs",
// "rate", "p50_ms", "p99_ms", "max_ms", "from_return": {...}}.

import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { Client, Worker } from "../dist/index.js";

const { values } = parseArgs({
  options: {
    url: { type: "string", default: process.env.READPAST_URL ?? "http://127.0.0.1:8080" },
    token: { type: "string", default: process.env.READPAST_TOKEN },
    jobs: { type: "string", default: "20000" },
    batch: { type: "string", default: "1000" },
    concurrency: { type: "string", default: "200" },
    queue: { type: "string", default: `drain-${process.pid}-${Date.now()}` },
    rate: { type: "string", default: "0" },
    seconds: { type: "string", default: "10" },
    enqueuer: { type: "string", default: "process" },
    "enqueue-only": { type: "boolean", default: false },
  },
});
const total = Number(values.jobs);
const batch = Number(values.batch);
const concurrency = Number(values.concurrency);
const queue = values.queue;
const client = new Client(values.url, { token: values.token, timeoutMs: 120_000 });
const rate = Number(values.rate);
if (!(rate >= 0) || !(Number(values.seconds) > 0) || !(concurrency >= 1)) {
  console.error("--rate must not be negative, --seconds and --concurrency must be positive");
  process.exit(2);
}
if (!["process", "inline", "none"].includes(values.enqueuer)) {
  console.error("--enqueuer must be process, inline or none");
  process.exit(2);
}
if (values["enqueue-only"]) {
  // The child of a latency run: enqueue, print when each enqueue returned.
  process.stdout.write(JSON.stringify(await enqueuePaced(queue)));
  process.exit(0);
}
if (rate > 0) {
  await latency();
  process.exit(0);
}

// Enqueue the backlog.
const enqueueStart = performance.now();
const sizes = [];
for (let left = total; left > 0; left -= batch) sizes.push(Math.min(batch, left));
let next = 0;
async function producer() {
  while (next < sizes.length) {
    const n = sizes[next++];
    await client.enqueueMany(Array.from({ length: n }, () => ({ kind: "noop", queue })));
  }
}
await Promise.all([producer(), producer(), producer(), producer()]);
const enqueueSeconds = (performance.now() - enqueueStart) / 1000;

// Drain it.
const ctrl = new AbortController();
let done = 0;
let finish;
const drained = new Promise((r) => (finish = r));
const worker = new Worker(client, {
  queues: [queue],
  concurrency,
  waitMs: 1000,
  signal: ctrl.signal,
  opentelemetry: false,
  handlers: {
    noop: () => {
      if (++done === total) finish();
      return undefined;
    },
  },
});
const start = performance.now();
const running = worker.run();
await drained;
// The last completions are in flight: wait until the server has them all.
while (worker.counts.succeeded + worker.counts.failed < total) await new Promise((r) => setTimeout(r, 5));
const seconds = (performance.now() - start) / 1000;
ctrl.abort();
await running;
const stats = await client.stats();
const counts = stats.queues[queue];
if (!counts || counts.succeeded !== total) {
  console.error(`not every job succeeded: ${JSON.stringify(counts)}`);
  process.exit(1);
}
console.log(
  JSON.stringify({
    jobs: total,
    concurrency,
    seconds: Number(seconds.toFixed(3)),
    jobs_per_second: Math.round(total / seconds),
    enqueue_per_second: Math.round(total / enqueueSeconds),
    claimed: worker.counts.claimed,
  }),
);

// ---- latency mode ------------------------------------------------------

/** Milliseconds since the epoch, with a fraction: comparable between
 * processes of one machine. */
function now() {
  return performance.timeOrigin + performance.now();
}

/** Enqueues rate x seconds jobs one by one, each at its time, from eight
 * loops (an enqueue waits for its commit), each job carrying the time of
 * its call; resolves with when each enqueue returned, by job id. */
async function enqueuePaced(q) {
  const n = Math.floor(rate * Number(values.seconds));
  const begin = now();
  const returned = {};
  async function loop(first) {
    for (let i = first; i < n; i += 8) {
      const pause = begin + (i * 1000) / rate - now();
      if (pause > 0) await new Promise((r) => setTimeout(r, pause));
      const job = await client.enqueue({ kind: "noop", queue: q, payload: { t: now() / 1000 } });
      returned[job.id] = now();
    }
  }
  await Promise.all(Array.from({ length: 8 }, (_, i) => loop(i)));
  return returned;
}

/** Runs the enqueuer in a child process (it does not share this event
 * loop) and resolves with its output. */
function enqueueInChild(q) {
  const args = [fileURLToPath(import.meta.url), "--url", values.url, "--queue", q, "--rate", values.rate,
    "--seconds", values.seconds, "--enqueue-only"];
  if (values.token) args.push("--token", values.token);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code !== 0) reject(new Error(`the enqueuer exited with ${code}`));
      else resolve(JSON.parse(out));
    });
  });
}

async function latency() {
  const q = values.enqueuer === "none" ? values.queue : `latency-${process.pid}-${Date.now()}`;
  const n = Math.floor(rate * Number(values.seconds));
  const starts = new Map(); // job id -> [enqueue called, handler started]
  let finish;
  const allStarted = new Promise((r) => (finish = r));
  const ctrl = new AbortController();
  const worker = new Worker(client, {
    queues: [q],
    concurrency,
    waitMs: 20_000,
    signal: ctrl.signal,
    opentelemetry: false,
    handlers: {
      noop: (job) => {
        starts.set(job.id, [job.payload.t * 1000, now()]);
        if (starts.size === n) finish();
        return undefined;
      },
    },
  });
  const running = worker.run();
  await new Promise((r) => setTimeout(r, 500)); // the first long poll is waiting
  const begin = now();
  let returned = {};
  if (values.enqueuer === "process") returned = await enqueueInChild(q);
  else if (values.enqueuer === "inline") returned = await enqueuePaced(q);
  else console.error(`waiting for ${n} jobs on queue ${q}`);
  let timer;
  const wait = values.enqueuer === "none" ? 30_000 + (n * 1000) / rate : 30_000;
  await Promise.race([allStarted, new Promise((r) => (timer = setTimeout(r, wait)))]);
  const achieved = (n * 1000) / (now() - begin);
  clearTimeout(timer);
  ctrl.abort();
  await running;
  if (starts.size < n) {
    console.error(`only ${starts.size} of ${n} jobs started within 30 s`);
    process.exit(1);
  }
  const fromCall = [...starts.values()].map(([t, s]) => s - t);
  // From the enqueue's return (its commit seen): the claim side alone. A
  // job can start before its enqueue returns.
  const fromReturn = [...starts].filter(([id]) => id in returned).map(([id, [, s]]) => Math.max(0, s - returned[id]));
  const out = { jobs: n, rate: Math.round(achieved), concurrency, ...percentiles(fromCall) };
  if (fromReturn.length > 0) out.from_return = percentiles(fromReturn);
  console.log(JSON.stringify(out));
}

function percentiles(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p) => Number(s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(1));
  return { p50_ms: at(0.5), p99_ms: at(0.99), max_ms: Number(s[s.length - 1].toFixed(1)) };
}
