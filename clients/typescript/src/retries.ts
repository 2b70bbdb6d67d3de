// A worker's calls about one claimed job (complete, fail, snooze, cancel,
// release): each tried again while its error may pass (no connection, 429,
// 5xx) and time is left, and given up at once when the worker's shutdown
// cuts it.

import type { Client, RequestOptions } from "./client.js";
import { ApiError, ConflictError, NetworkError, NotFoundError, ReadpastError, TooManyAttemptsError } from "./errors.js";
import type { ClaimedJob } from "./types.js";
import type { Logger } from "./worker-options.js";

/** How long a release at shutdown is tried, its retries included; one
 * that got no answer by then is given up, and its lease ends the claim. */
export const RELEASE_WAIT_MS = 5000;

/** The first pause before a call is tried again; it doubles up to the
 * longest one, unless the server's Retry-After asks for more. */
const FIRST_PAUSE_MS = 100;
const LONGEST_PAUSE_MS = 2000;

/** What became of a call: done; refused because the job is no longer the
 * worker's ("lost"); given up because its error will not pass or its time
 * ran out ("failed"); or cut off by the plan's `cut` signal ("cut"). */
export type CallResult = "done" | "lost" | "failed" | "cut";

/** One attempt of a call, made with these request options. */
export type Attempt = (options: RequestOptions) => Promise<unknown>;

/** How a call about a job is tried. */
export interface CallPlan {
  /** What the call does, for the log ("complete", "release"). */
  what: string;
  /** Until when (a Date.now() time) it is tried again. */
  until: number;
  /** true: each attempt waits for its answer only as long as is left
   * until `until`, so that the call ends by then; false: each waits the
   * client's timeout. */
  bounded: boolean;
  /** Once aborted, the call is given up: an attempt in flight ends at once
   * (abort it with TIMED_OUT) and none more is made. */
  cut?: AbortSignal | undefined;
  /** The classes of the errors that reject the call instead. */
  reraise?: Array<abstract new (...args: never[]) => Error> | undefined;
  /** Where it logs, and what each line starts with ("worker w: job 7: "). */
  log: Logger;
  prefix: string;
}

/**
 * Makes a call about a job, trying it again while its error may pass and
 * the next attempt can start before `plan.until` (a Retry-After that ends
 * later gives it up). Resolves with what became of it; rejects with the
 * errors of the classes in `plan.reraise`.
 */
export async function callRetrying(attempt: Attempt, plan: CallPlan): Promise<CallResult> {
  const { what, log, prefix, cut } = plan;
  let backoff = FIRST_PAUSE_MS;
  for (;;) {
    if (cut?.aborted) return "cut";
    const left = plan.until - Date.now();
    if (plan.bounded && left <= 0) {
      log.error(`${prefix}${what}: no time left (given up: the lease will expire and the job run again)`);
      return "failed";
    }
    try {
      await attempt({ signal: cut, timeoutMs: plan.bounded ? left : undefined });
      return "done";
    } catch (e) {
      if (cut?.aborted) return "cut";
      if (plan.reraise?.some((c) => e instanceof c)) throw e;
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        log.warn(`${prefix}${what} refused (${e.code}): the job is no longer ours`);
        return "lost";
      }
      const passing =
        e instanceof NetworkError || (e instanceof ApiError && (e.status >= 500 || e instanceof TooManyAttemptsError));
      let pause = backoff;
      if (e instanceof ApiError && e.retryAfter) pause = Math.max(pause, e.retryAfter * 1000);
      if (!passing || Date.now() + pause >= plan.until) {
        log.error(`${prefix}${what}: ${describe(e)} (given up: the lease will expire and the job run again)`);
        return "failed";
      }
      log.warn(`${prefix}${what}: ${describe(e)}; trying again`);
      await pauseFor(pause, cut);
      backoff = Math.min(backoff * 2, LONGEST_PAUSE_MS);
    }
  }
}

/**
 * Releases a job at shutdown: pending again at once, the attempt not
 * counted. It is tried for RELEASE_WAIT_MS at most in all from now, its
 * retries sharing that time: each attempt waits only for what is left of
 * it, so an answer that stalls or trickles is given up when it ends. The
 * lease does not shorten it: the worker's estimate of the lease's end
 * counts from when the claim was sent, which for a claim answered late in
 * its long poll is well before the lease really ends, and a release the
 * lease outlived is only refused as stale.
 */
export function releaseAtShutdown(client: Client, job: ClaimedJob, log: Logger, prefix: string): Promise<CallResult> {
  const until = Date.now() + RELEASE_WAIT_MS;
  return callRetrying((o) => client.release(job.id, job.token, o), { what: "release", until, bounded: true, log, prefix });
}

/** Resolves after ms, or at once when signal aborts. */
export function pauseFor(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** An error's message, for the log. */
export function describe(e: unknown): string {
  if (e instanceof ReadpastError || e instanceof Error) return e.message;
  return String(e);
}
