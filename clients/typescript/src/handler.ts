// What a handler gets, and what it may return or throw besides a result.

import type { ClaimedJob } from "./types.js";

/**
 * Returned or thrown by a handler: the job is pending again after
 * `seconds`, the attempt not counted. Past the server's snooze limit
 * (`--max-snoozes`) the attempt fails instead.
 */
export class Snooze extends Error {
  readonly seconds: number;
  constructor(seconds: number) {
    if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) {
      throw new RangeError(`Snooze needs a number of seconds of at least 0, not ${String(seconds)}`);
    }
    super(`snoozed for ${seconds}s`);
    this.name = "Snooze";
    this.seconds = seconds;
  }
}

/** Returned or thrown by a handler: the job is cancelled (state
 * `cancelled`), not retried. `reason` goes to the worker's log. */
export class Cancel extends Error {
  readonly reason: string;
  constructor(reason = "") {
    super(reason || "cancelled by its handler");
    this.name = "Cancel";
    this.reason = reason;
  }
}

/** Returned or thrown by a handler: the attempt fails and the job fails for
 * good whatever attempts remain, with `reason` as the attempt's error. */
export class Discard extends Error {
  readonly reason: string;
  constructor(reason = "") {
    super(reason || "discarded by its handler");
    this.name = "Discard";
    this.reason = reason;
  }
}

/** The second argument of a handler. */
export interface JobContext {
  /**
   * Aborted when the handler's work is no longer wanted: its timeout
   * passed (reason: a HandlerTimeoutError), the job's claim was lost (it
   * was cancelled, or its lease expired), or the worker stopped and
   * released the job. Pass it to fetch and the like; whatever the handler
   * returns after it fired is dropped.
   */
  signal: AbortSignal;
  /** The worker's name, as the server records it on the job. */
  worker: string;
}

/**
 * A handler: resolves with the job's result (any JSON value, or undefined
 * for none), or a Snooze, Cancel or Discard; or throws (rejects): any other
 * error fails the attempt with its stack, and the server retries the job
 * with backoff until its `max_attempts`.
 */
export type Handler = (job: ClaimedJob, ctx: JobContext) => unknown;

/** The reason of a job's signal when its handler ran past its timeout. */
export class HandlerTimeoutError extends Error {
  constructor(ms: number) {
    super(`handler timed out after ${ms} ms`);
    this.name = "HandlerTimeoutError";
  }
}

/** The reason of a job's signal when the job is no longer the worker's. */
export class JobLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JobLostError";
  }
}

/** The reason of a job's signal when the worker stops and releases it. */
export class WorkerStoppedError extends Error {
  constructor() {
    super("the worker stopped and released the job");
    this.name = "WorkerStoppedError";
  }
}
