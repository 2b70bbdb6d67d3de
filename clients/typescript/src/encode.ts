// How the client's arguments become the API's paths, headers and request
// bodies, with the checks that refuse bad input before anything is sent.

import type { EnqueueOptions } from "./client.js";
import type { EnqueueBody, FlowJobBody, FlowJobSpec, Input, JobSpec, OpenBatchBody, OpenBatchSpec, Time } from "./types.js";

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

export function batchPath(id: number, action?: string): string {
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new TypeError(`a batch id must be a positive integer, not ${String(id)}`);
  }
  return action ? `/v1/batches/${id}/${action}` : `/v1/batches/${id}`;
}

/** A limit query parameter: undefined (the server's default) or an
 * integer from 1 to most. */
export function checkLimit(limit: number | undefined, most: number): number | undefined {
  if (limit === undefined) return undefined;
  if (!Number.isInteger(limit) || limit < 1 || limit > most) {
    throw new RangeError(`limit must be an integer between 1 and ${most}, not ${String(limit)}`);
  }
  return limit;
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

/** One job of a flow as `POST /v1/flows` takes it; refuses a job or an
 * `after` that is not of the right shape before anything is sent. */
export function flowJobBody(job: FlowJobSpec, name: string): FlowJobBody {
  if (job === null || typeof job !== "object") {
    throw new TypeError(`${name} must be an object with at least a kind`);
  }
  const { after, ...rest } = job;
  const body: FlowJobBody = enqueueBody(rest, name);
  if (after === undefined) return body;
  if (!Array.isArray(after)) {
    throw new TypeError(`${name}.after must be an array of edges`);
  }
  body.after = after.map((edge, k) => {
    if (edge === null || typeof edge !== "object") {
      throw new TypeError(`${name}.after[${k}] must be an object with a ref or a job_id`);
    }
    return compact(edge);
  });
  return body;
}

/** The body of `POST /v1/batches`; refuses a spec without a finishing
 * job before anything is sent. Other fields go as they are, for the
 * server to judge (an unknown one is its `invalid_field`). */
export function openBatchBody(spec: OpenBatchSpec): OpenBatchBody {
  if (spec === null || typeof spec !== "object" || spec.finisher === undefined) {
    throw new TypeError("openBatch needs an object with a finisher: { finisher: { kind } }");
  }
  const { finisher, ...rest } = spec;
  return { ...compact<Omit<OpenBatchBody, "finisher">>(rest), finisher: enqueueBody(finisher, "finisher") };
}
