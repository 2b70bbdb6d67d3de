// What a worker sends for a failed attempt: the error's message and stack,
// cut to what the server takes.

import type { JobOutcome } from "./tracing.js";
import type { ClaimedJob } from "./types.js";

/** The most of an error message and of a stack a failure sends. */
const MAX_MESSAGE = 8 * 1024;
const MAX_STACK = 64 * 1024;

/** A failure's body: the message (cut to MAX_MESSAGE, "failed" when
 * empty), the stack when there is one (its middle cut out past
 * MAX_STACK), and discard when the job fails for good. */
export function failSpec(
  message: string,
  stack: string,
  discard: boolean,
): { error: string; stack?: string; discard?: boolean } {
  const error = message.slice(0, MAX_MESSAGE) || "failed";
  if (stack.length > MAX_STACK) stack = stack.slice(0, MAX_STACK / 2) + "\n…\n" + stack.slice(-MAX_STACK / 2);
  return { error, ...(stack ? { stack } : {}), ...(discard ? { discard: true } : {}) };
}

/** The outcome of a failed attempt: retrying while attempts remain. */
export function failedOutcome(job: ClaimedJob): JobOutcome {
  return job.attempt < job.max_attempts ? "retrying" : "failed";
}

/** What a thrown value says: an Error's name and message, anything else
 * as JSON. */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message ? `${e.name}: ${e.message}` : e.name;
  try {
    return `thrown: ${typeof e === "string" ? e : JSON.stringify(e)}`;
  } catch {
    return `thrown: ${String(e)}`;
  }
}

/** An Error's stack; "" for anything else. */
export function stackOf(e: unknown): string {
  return e instanceof Error && typeof e.stack === "string" ? e.stack : "";
}
