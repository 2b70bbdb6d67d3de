// Optional OpenTelemetry: when @opentelemetry/api can be loaded, each job
// runs inside a consumer span whose parent is the job's trace context.

import type { ClaimedJob } from "./types.js";

/** The parts of `@opentelemetry/api` the worker uses. Pass the module
 * itself (`import * as api from "@opentelemetry/api"`). */
export interface OpenTelemetryApi {
  trace: {
    getTracer(name: string, version?: string): OtelTracer;
    setSpan(context: unknown, span: OtelSpan): unknown;
    getSpanContext(context: unknown): unknown;
  };
  context: {
    active(): unknown;
    with<F extends (...args: never[]) => unknown>(context: unknown, fn: F): ReturnType<F>;
  };
  propagation: {
    extract(
      context: unknown,
      carrier: Record<string, string>,
      getter: {
        get(carrier: Record<string, string>, key: string): string | undefined;
        keys(carrier: Record<string, string>): string[];
      },
    ): unknown;
  };
  SpanKind: { CONSUMER: number };
  SpanStatusCode: { ERROR: number };
}

interface OtelTracer {
  startSpan(
    name: string,
    options: {
      kind: number;
      attributes: Record<string, string | number>;
      links?: { context: unknown }[];
    },
    context: unknown,
  ): OtelSpan;
}

interface OtelSpan {
  setAttribute(key: string, value: string | number): unknown;
  recordException(exception: Error | string): void;
  setStatus(status: { code: number; message?: string }): void;
  end(): void;
}

/** The outcome of an attempt, as readpast.job.outcome on its span
 * (docs/design/tracing.md). */
export type JobOutcome =
  | "succeeded"
  | "retrying"
  | "failed"
  | "discarded"
  | "snoozed"
  | "cancelled"
  | "released"
  | "lease_lost";

/** One job's span: run the handler inside it, then end it once, with the
 * attempt's outcome and, for a failure, its error. */
export interface JobSpan {
  run<T>(fn: () => T): T;
  end(outcome?: JobOutcome, error?: unknown): void;
}

const TRACER_NAME = "@readpast/client";

const getter = {
  get: (carrier: Record<string, string>, key: string): string | undefined => carrier[key],
  keys: (carrier: Record<string, string>): string[] => Object.keys(carrier),
};

/** Loads @opentelemetry/api if it is installed; null when it is not, or
 * when `given` is false. */
export async function loadOpenTelemetry(given?: OpenTelemetryApi | false): Promise<OpenTelemetryApi | null> {
  if (given === false) return null;
  if (given) return given;
  // A name in a variable: the package is an optional peer, and neither
  // the compiler nor a bundler should require it.
  const name = "@opentelemetry/api";
  try {
    const mod = (await import(name)) as Partial<OpenTelemetryApi> & { default?: Partial<OpenTelemetryApi> };
    const api = mod.trace ? mod : mod.default;
    return api && api.trace && api.context && api.propagation ? (api as OpenTelemetryApi) : null;
  } catch {
    return null;
  }
}

/** Starts the consumer span `process <queue>` of a job: its parent is the
 * job's creation context (its traceparent, through the global
 * propagator), which it also links to, as the messaging conventions ask
 * of a span that processes one message. */
export function startJobSpan(api: OpenTelemetryApi, job: ClaimedJob, version: string, clientId: string): JobSpan {
  const carrier: Record<string, string> = {};
  if (typeof job.traceparent === "string") carrier["traceparent"] = job.traceparent;
  if (typeof job.tracestate === "string") carrier["tracestate"] = job.tracestate;
  const parent = api.propagation.extract(api.context.active(), carrier, getter);
  const created = carrier["traceparent"] !== undefined ? api.trace.getSpanContext(parent) : undefined;
  const attributes: Record<string, string | number> = {
    "messaging.system": "readpast",
    "messaging.destination.name": job.queue,
    "messaging.operation.type": "process",
    "messaging.operation.name": "process",
    "messaging.message.id": String(job.id),
    "messaging.client.id": clientId,
    "readpast.job.kind": job.kind,
    "readpast.job.attempt": job.attempt,
  };
  if (typeof job.group === "string" && job.group !== "") attributes["readpast.job.group"] = job.group;
  const span = api.trace.getTracer(TRACER_NAME, version).startSpan(
    `process ${job.queue}`,
    { kind: api.SpanKind.CONSUMER, attributes, ...(created !== undefined ? { links: [{ context: created }] } : {}) },
    parent,
  );
  const ctx = api.trace.setSpan(parent, span);
  let ended = false;
  return {
    run: <T>(fn: () => T): T => api.context.with(ctx, fn),
    end(outcome?: JobOutcome, error?: unknown): void {
      if (ended) return;
      ended = true;
      if (outcome !== undefined) span.setAttribute("readpast.job.outcome", outcome);
      if (error !== undefined) {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({
          code: api.SpanStatusCode.ERROR,
          message: error instanceof Error ? error.message : String(error),
        });
      }
      span.end();
    },
  };
}
