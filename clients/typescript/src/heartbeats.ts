// A running job's heartbeats: when each is sent, how long it waits for its
// answer, and when one that failed is sent again.

import { TIMED_OUT } from "./send.js";

/** The shortest time from one heartbeat's start to the next after it failed. */
const RETRY_MIN_MS = 100;

/** What a heartbeat did: extended the lease, found the claim lost, or got
 * no usable answer (then the next one goes soon). */
export type Beat = { type: "ok" } | { type: "lost"; reason: string } | { type: "failed"; retryAfterMs: number };

/** How a job is heartbeated. */
export interface HeartbeatPlan {
  /** The time from one heartbeat's start to the next one's. */
  intervalMs: number;
  /** Sends one heartbeat, waiting at most timeoutMs for its answer, and
   * ending at once when signal aborts. */
  beat: (timeoutMs: number, signal: AbortSignal) => Promise<Beat>;
  /** When the job's lease ends now (Date.now() time). */
  leaseEnd: () => number;
  /** Called once, when a heartbeat found the claim lost; no more are sent. */
  lost: (reason: string) => void;
}

/**
 * Heartbeats a job until the returned function is called, which also ends
 * a heartbeat still waiting for its answer. Each heartbeat
 * waits at most one interval for its answer, and the next starts one
 * interval after the one before started; so one that got no answer (a
 * connection dropped without a word) is sent again at once, well within
 * the lease, and one that failed quickly is sent again after a short pause
 * that grows, or after the server's Retry-After, but before the lease ends.
 */
export function startHeartbeats(plan: HeartbeatPlan): () => void {
  const { intervalMs } = plan;
  let over = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let retry = 0; // the pause before the next heartbeat after failed ones
  const stopped = new AbortController();
  const heartbeat = async (): Promise<void> => {
    const started = Date.now();
    const b = await plan.beat(intervalMs, stopped.signal);
    if (over) return;
    if (b.type === "lost") {
      over = true;
      plan.lost(b.reason);
      return;
    }
    let next = started + intervalMs;
    if (b.type === "failed") {
      retry = Math.min(Math.max(retry * 2, RETRY_MIN_MS), intervalMs);
      // Soon, and one answer's wait before the lease ends; never in a tight loop.
      next = Math.min(started + Math.max(retry, b.retryAfterMs), plan.leaseEnd() - intervalMs);
      next = Math.max(next, started + RETRY_MIN_MS);
    } else retry = 0;
    timer = setTimeout(() => void heartbeat(), Math.max(0, next - Date.now()));
  };
  timer = setTimeout(() => void heartbeat(), intervalMs);
  return () => {
    over = true;
    clearTimeout(timer);
    // Ended as a timeout ends it: at once, so nothing of it outlives the job.
    stopped.abort(TIMED_OUT);
  };
}
