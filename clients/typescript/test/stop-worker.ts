// A worker process for stop.test: runs `sleep` jobs (payload {"ms": n})
// from the queue given, printing "start ID" and "end ID" as each handler
// starts and ends, until SIGTERM or SIGINT; a second signal releases the
// running jobs at once.
//
//   node build/test/stop-worker.js QUEUE CONCURRENCY SHUTDOWN_MS

import { Worker, shutdownOnSignals } from "@readpast/client";

import { client } from "./support.js";

const [queue = "", concurrency = "4", shutdownMs = "30000"] = process.argv.slice(2);
const say = (line: string): void => void process.stdout.write(line + "\n");
const log = (line: string): void => void process.stderr.write(`${new Date().toISOString()} ${line}\n`);

let worker: Worker | undefined;
const stop = shutdownOnSignals({ onRepeat: () => worker?.stop({ timeoutMs: 0 }) });
worker = new Worker(client(), {
  queues: [queue],
  concurrency: Number(concurrency),
  shutdownTimeoutMs: Number(shutdownMs),
  leaseMs: 30_000,
  waitMs: 20_000,
  signal: stop.signal,
  logger: { info: log, warn: log, error: log },
  handlers: {
    // Does not look at its signal: a stop must release it.
    sleep: async (job) => {
      const ms = (job.payload as { ms: number }).ms;
      say(`start ${job.id}`);
      await new Promise((r) => setTimeout(r, ms));
      say(`end ${job.id}`);
      return { slept: ms };
    },
  },
});
stop.signal.addEventListener("abort", () => log("signal received; stopping"));
say("ready");
await worker.run();
stop.dispose();
say(`exit ${JSON.stringify(worker.counts)}`);
// Handlers still sleeping were released; do not wait for them.
process.exit(0);
