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
  },
});
const total = Number(values.jobs);
const batch = Number(values.batch);
const concurrency = Number(values.concurrency);
const queue = values.queue;
const client = new Client(values.url, { token: values.token, timeoutMs: 120_000 });

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
