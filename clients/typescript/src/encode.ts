// How the client's arguments become the API's paths, headers and request
// bodies, with the checks that refuse bad input before anything is sent.

import type { EnqueueOptions } from "./client.js";
import type { EnqueueBody, Input, JobSpec, Time } from "./types.js";

export function enqueueBody(job: JobSpec, name: string): EnqueueBody {
  if (job === null || typeof job !== "object") {
    throw new TypeError(`${name} must be an object with at least a kind`);
  }
  const { run_at, ...rest } = job;
  const body = compact<EnqueueBody>(rest);
  if (run_at !== undefined) body.run_at = timeOf(run_at, `${name}.run_at`);
  return body;
}

export function enqueueHeaders(opts: EnqueueOptions): Record<string, string> {
  const h: Record<string, string> = {};
  if (opts.idempotencyKey !== undefined) h["Idempotency-Key"] = opts.idempotencyKey;
  if (opts.traceparent !== undefined) h["traceparent"] = opts.traceparent;
  if (opts.tracestate !== undefined) h["tracestate"] = opts.tracestate;
  return h;
}

/** o without its undefined properties: the request body the API takes. */
export function compact<T>(o: Input<T>): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as T;
}

export function timeOf(t: Time, name: string): string {
  if (t instanceof Date) {
    if (Number.isNaN(t.getTime())) throw new RangeError(`${name} is an invalid Date`);
    return t.toISOString();
  }
  if (typeof t !== "string") throw new TypeError(`${name} must be a Date or an RFC 3339 string`);
  return t;
}

export function jobPath(id: number, action?: string): string {
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new TypeError(`a job id must be a positive integer, not ${String(id)}`);
  }
  return action ? `/v1/jobs/${id}/${action}` : `/v1/jobs/${id}`;
}

export function schedulePath(name: string, action?: string): string {
  const p = `/v1/schedules/${segment(name, "schedule name")}`;
  return action ? `${p}/${action}` : p;
}

export function limitPath(key: string, action?: string): string {
  const p = `/v1/limits/${segment(key, "key")}`;
  return action ? `${p}/${action}` : p;
}

/** A name as one path segment: percent-encoded (":" and "*" kept readable),
 * with "." and ".." kept from meaning a folder. */
export function segment(value: string, name: string): string {
  if (typeof value !== "string" || value === "") {
    throw new TypeError(`${name} must be a non-empty string`);
  }
  if (value === "." || value === "..") return value.replaceAll(".", "%2E");
  return encodeURIComponent(value).replaceAll("%3A", ":");
}
