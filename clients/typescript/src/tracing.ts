// Optional OpenTelemetry: when @opentelemetry/api can be loaded, each job
// runs inside a consumer span whose parent is the job's trace context.

import type { ClaimedJob } from "./types.js";

/** The parts of `@opentelemetry/api` the worker uses. Pass the module
 * itself (`import * as api from "@opentelemetry/api"`). */
export interface OpenTelemetryApi {
  trace: {
    getTracer(name: string, version?: string): OtelTracer;
    setSpan(context: unknown, span: OtelSpan): unknown;
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
    options: { kind: number; attributes: Record<string, string | number> },
    context: unknown,
  ): OtelSpan;
}

interface OtelSpan {
  recordException(exception: Error | string): void;
  setStatus(status: { code: number; message?: string }): void;
  end(): void;
}

/** One job's span: run the handler inside it, then end it once. */
export interface JobSpan {
  run<T>(fn: () => T): T;
  end(error?: unknown): void;
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

/** Starts the consumer span `process <queue>` of a job, its parent the
 * job's traceparent (through the global propagator). */
export function startJobSpan(api: OpenTelemetryApi, job: ClaimedJob, version: string): JobSpan {
  const carrier: Record<string, string> = {};
  if (typeof job.traceparent === "string") carrier["traceparent"] = job.traceparent;
  if (typeof job.tracestate === "string") carrier["tracestate"] = job.tracestate;
  const parent = api.propagation.extract(api.context.active(), carrier, getter);
  const span = api.trace.getTracer(TRACER_NAME, version).startSpan(
    `process ${job.queue}`,
    {
      kind: api.SpanKind.CONSUMER,
      attributes: {
        "messaging.system": "readpast",
        "messaging.destination.name": job.queue,
        "messaging.operation.type": "process",
        "messaging.message.id": String(job.id),
        "readpast.job.kind": job.kind,
        "readpast.job.attempt": job.attempt,
      },
    },
    parent,
  );
  const ctx = api.trace.setSpan(parent, span);
  let ended = false;
  return {
    run: <T>(fn: () => T): T => api.context.with(ctx, fn),
    end(error?: unknown): void {
      if (ended) return;
      ended = true;
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
