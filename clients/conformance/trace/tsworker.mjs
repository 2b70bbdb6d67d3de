// The TypeScript hop of the cross-language trace test (../trace_test.go).
//
// Runs @readpast/client's Worker (clients/typescript, built to its dist/)
// on one queue for one job, with the OpenTelemetry SDK registered: the
// worker runs the handler inside its `process <queue>` consumer span,
// whose parent is the job's traceparent. The handler makes a span of its
// own (a child of the process span, through the active context) and
// succeeds. Spans go to the collector over OTLP/HTTP (protobuf) under
// service.name "ts-worker".
//
// Environment: READPAST_URL, READPAST_TOKEN, TRACE_QUEUE (the queue),
// TRACE_OTLP_URL (the collector's traces URL, .../v1/traces). Prints what
// the handler saw as one JSON line.

import * as api from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";

import { Client, Worker } from "../../typescript/dist/index.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "ts-worker" }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: env("TRACE_OTLP_URL") }))],
});
// The global tracer provider, W3C propagator and async context manager.
provider.register();

const queue = env("TRACE_QUEUE");
const tracer = api.trace.getTracer("readpast-trace-test");
let worker;
worker = new Worker(new Client(env("READPAST_URL"), { token: env("READPAST_TOKEN") }), {
  queues: [queue],
  concurrency: 1,
  waitMs: 5000,
  shutdownTimeoutMs: 10_000,
  opentelemetry: api,
  handlers: {
    traced: async (job) => {
      worker.stop(); // one job: claim no more, and return once it is recorded
      const active = api.trace.getActiveSpan()?.spanContext();
      tracer.startSpan("ts handler work").end();
      console.log(JSON.stringify({ job: job.id, attempt: job.attempt, traceparent: job.traceparent ?? null,
        active_trace_id: active?.traceId ?? null, active_span_id: active?.spanId ?? null }));
      return { ok: true };
    },
  },
});
await worker.run();
await provider.shutdown(); // exports what is still pending
