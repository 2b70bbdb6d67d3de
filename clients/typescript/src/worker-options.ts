// How a Worker is made (its options, checked), and what it counts.

import type { Handler } from "./handler.js";
import type { OpenTelemetryApi } from "./tracing.js";

/** Where the worker writes what happens; `console` will do. */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** How a Worker runs. */
export interface WorkerOptions {
  /** The queues to take jobs from; `["default"]` by default. */
  queues?: string[];
  /** The handler of each job kind. A job of a kind with none fails its attempt. */
  handlers: Record<string, Handler>;
  /** How many jobs run at once (default 1). */
  concurrency?: number;
  /** The worker's name, recorded on the jobs it runs. */
  name?: string;
  /** How long a claim holds a job without a heartbeat (default 30 s). */
  leaseMs?: number;
  /** How often a running job is heartbeated (default a third of leaseMs);
   * each heartbeat waits at most this long for its answer. */
  heartbeatMs?: number;
  /** How long a claim long-polls for jobs (default 20 s, at most 300 s; 0 polls every second). */
  waitMs?: number;
  /** true: the worker's claims ask for each job's parents' results, and
   * a handler of a job that runs after others (a job of a flow) reads
   * them as `job.parent_results`, by the parents' refs in the flow (null
   * for a parent that has not succeeded or stored no result). false (the
   * default): the claims read nothing more. */
  parentResults?: boolean;
  /** A handler running longer fails its attempt and its signal is aborted. */
  handlerTimeoutMs?: number;
  /** How long a stop lets running jobs finish before releasing them (default 30 s). */
  shutdownTimeoutMs?: number;
  /** Stops the worker gracefully when it aborts. An AbortSignal stays
   * aborted: a `run()` made after it aborted returns at once, claiming
   * nothing. A worker meant to run again is stopped with `stop()`, or
   * made anew with a new signal. */
  signal?: AbortSignal;
  /** Where to log; by default warnings and errors go to the console. */
  logger?: Logger;
  /** The `@opentelemetry/api` module to trace with, or false for none. By
   * default it is loaded if installed. */
  opentelemetry?: OpenTelemetryApi | false;
}

/** What a worker did, by outcome. */
export interface WorkerCounts {
  claimed: number;
  succeeded: number;
  failed: number;
  snoozed: number;
  cancelled: number;
  discarded: number;
  released: number;
  timedOut: number;
  lost: number;
}

/** Warnings and errors to the console; nothing else. */
export const defaultLogger: Logger = {
  info: () => {},
  warn: (m) => console.warn(m),
  error: (m) => console.error(m),
};

/** A worker's options with their defaults, checked. */
export interface CheckedOptions {
  queues: string[];
  concurrency: number;
  leaseMs: number;
  heartbeatMs: number;
  waitMs: number;
  shutdownTimeoutMs: number;
  handlers: Map<string, Handler>;
}

/** The options with their defaults; throws a TypeError or RangeError
 * naming the first that is not valid. */
export function checkOptions(o: WorkerOptions): CheckedOptions {
  const queues = o.queues ?? ["default"];
  if (!Array.isArray(queues) || queues.length === 0) {
    throw new TypeError("queues must be an array of at least one queue name");
  }
  const concurrency = o.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError("concurrency must be an integer of at least 1");
  }
  const leaseMs = o.leaseMs ?? 30_000;
  if (!(leaseMs > 0)) throw new RangeError("leaseMs must be positive");
  const heartbeatMs = o.heartbeatMs ?? leaseMs / 3;
  if (!(heartbeatMs > 0 && heartbeatMs < leaseMs)) {
    throw new RangeError("heartbeatMs must be positive and shorter than leaseMs");
  }
  const waitMs = o.waitMs ?? 20_000;
  if (!(waitMs >= 0 && waitMs <= 300_000)) throw new RangeError("waitMs must be between 0 and 300000");
  if (o.handlerTimeoutMs !== undefined && !(o.handlerTimeoutMs > 0)) {
    throw new RangeError("handlerTimeoutMs must be positive");
  }
  const shutdownTimeoutMs = o.shutdownTimeoutMs ?? 30_000;
  if (!(shutdownTimeoutMs >= 0)) throw new RangeError("shutdownTimeoutMs must not be negative");
  const handlers = new Map<string, Handler>();
  for (const [kind, fn] of Object.entries(o.handlers ?? {})) {
    if (typeof fn !== "function") throw new TypeError(`the handler of ${JSON.stringify(kind)} is not a function`);
    handlers.set(kind, fn);
  }
  return { queues: [...queues], concurrency, leaseMs, heartbeatMs, waitMs, shutdownTimeoutMs, handlers };
}
