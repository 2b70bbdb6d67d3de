// Tracing: with @opentelemetry/api installed, each job runs inside a
// consumer span "process <queue>" whose parent is the job's traceparent.
// A recording tracer, a W3C propagator and an AsyncLocalStorage context
// manager are registered globally here (this file runs in a process of
// its own).

import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";

import * as api from "@opentelemetry/api";
import { Client, Worker, type ClaimedJob, type Handler, type Job } from "@readpast/client";

import { client, finished, unique, waitUntil } from "./support.js";

interface Recorded {
  name: string;
  kind: api.SpanKind | undefined;
  attributes: api.Attributes;
  parent: api.SpanContext | undefined;
  links: api.Link[];
  context: api.SpanContext;
  status: api.SpanStatus | undefined;
  exceptions: unknown[];
  ended: boolean;
}

const spans: Recorded[] = [];

const tracer = {
  startSpan(name: string, options: api.SpanOptions = {}, ctx: api.Context = api.context.active()): api.Span {
    const parent = api.trace.getSpanContext(ctx);
    const rec: Recorded = {
      name,
      kind: options.kind,
      attributes: { ...options.attributes },
      parent,
      links: options.links ?? [],
      context: {
        traceId: parent?.traceId ?? randomBytes(16).toString("hex"),
        spanId: randomBytes(8).toString("hex"),
        traceFlags: api.TraceFlags.SAMPLED,
      },
      status: undefined,
      exceptions: [],
      ended: false,
    };
    spans.push(rec);
    const span = {
      spanContext: () => rec.context,
      setAttribute: (key: string, value: api.AttributeValue) => {
        rec.attributes[key] = value;
        return span;
      },
      setAttributes: () => span,
      addEvent: () => span,
      addLink: () => span,
      addLinks: () => span,
      setStatus: (s: api.SpanStatus) => {
        rec.status = s;
        return span;
      },
      updateName: () => span,
      end: () => {
        assert.equal(rec.ended, false, "a span ends once");
        rec.ended = true;
      },
      isRecording: () => true,
      recordException: (e: api.Exception) => void rec.exceptions.push(e),
    };
    return span as api.Span;
  },
  startActiveSpan(): never {
    throw new Error("not used");
  },
};

api.trace.setGlobalTracerProvider({ getTracer: () => tracer as unknown as api.Tracer });
api.propagation.setGlobalPropagator({
  fields: () => ["traceparent", "tracestate"],
  inject: () => {},
  extract(ctx, carrier, getter) {
    const tp = getter.get(carrier, "traceparent");
    const m = typeof tp === "string" ? /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(tp) : null;
    if (!m) return ctx;
    return api.trace.setSpanContext(ctx, {
      traceId: m[1] ?? "",
      spanId: m[2] ?? "",
      traceFlags: parseInt(m[3] ?? "0", 16),
      isRemote: true,
    });
  },
});
const als = new AsyncLocalStorage<api.Context>();
api.context.setGlobalContextManager({
  active: () => als.getStore() ?? api.ROOT_CONTEXT,
  with: (ctx, fn, thisArg, ...args) => als.run(ctx, () => fn.call(thisArg, ...args)),
  bind: (_ctx, target) => target,
  enable() {
    return this;
  },
  disable() {
    return this;
  },
});

const traceId = "0af7651916cd43dd8448eb211c80319c";
const traceparent = `00-${traceId}-b7ad6b7169203331-01`;

/** Runs one worker on queue until the jobs finish. */
async function work(c: Client, queue: string, handlers: Record<string, Handler>, ids: number[]): Promise<Job[]> {
  const ctrl = new AbortController();
  // The module is loaded by the worker itself (dynamic import), not passed.
  const w = new Worker(c, { queues: [queue], handlers, waitMs: 2000, signal: ctrl.signal });
  const done = w.run();
  try {
    return await Promise.all(ids.map((id) => finished(c, id)));
  } finally {
    ctrl.abort();
    await done;
  }
}

describe("tracing", { concurrency: true }, () => {
  test("a consumer span per job, its parent the job's traceparent", async () => {
    // A server that sends the job's trace context in claims (simulated:
    // the claim answer is made here), so the parent is checked whatever
    // the server in use keeps.
    const job: ClaimedJob = {
      id: 4242,
      queue: "traced",
      kind: "traced",
      payload: {},
      priority: 0,
      state: "running",
      attempt: 2,
      max_attempts: 25,
      run_at: new Date().toISOString(),
      group: null,
      created_at: new Date().toISOString(),
      errors: [],
      tags: [],
      snoozes: 0,
      token: "t",
      lease_expires_at: new Date(Date.now() + 30_000).toISOString(),
      traceparent,
      tracestate: "vendor=1",
    };
    let claims = 0;
    let completed: unknown;
    const fake = new Client("http://127.0.0.1:9", {
      fetch: async (input, init) => {
        const path = new URL(String(input)).pathname;
        if (path === "/v1/claim") {
          if (claims++ === 0) return json({ jobs: [job] });
          await new Promise((_r, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason)));
        }
        if (path === "/v1/jobs/4242/complete") {
          completed = JSON.parse(String(init?.body));
          return json({ ...job, state: "succeeded" });
        }
        return json({ id: 4242, lease_expires_at: job.lease_expires_at });
      },
    });
    let active: api.SpanContext | undefined;
    const ctrl = new AbortController();
    const w = new Worker(fake, {
      queues: ["traced"],
      signal: ctrl.signal,
      handlers: {
        traced: () => {
          active = api.trace.getActiveSpan()?.spanContext();
          return "ok";
        },
      },
    });
    const done = w.run();
    await waitUntil(() => completed, "the job to complete");
    ctrl.abort();
    await done;
    const span = spans.find((s) => s.name === "process traced");
    assert.ok(span, "a span named process <queue>");
    assert.equal(span.kind, api.SpanKind.CONSUMER);
    assert.equal(span.parent?.traceId, traceId);
    assert.equal(span.parent?.spanId, "b7ad6b7169203331");
    assert.equal(span.parent?.isRemote, true);
    assert.deepEqual(span.attributes, {
      "messaging.system": "readpast",
      "messaging.destination.name": "traced",
      "messaging.operation.type": "process",
      "messaging.operation.name": "process",
      "messaging.message.id": "4242",
      "messaging.client.id": w.name,
      "readpast.job.kind": "traced",
      "readpast.job.attempt": 2,
      "readpast.job.outcome": "succeeded",
    });
    // The creation context is the parent and is linked too.
    assert.equal(span.links.length, 1);
    assert.equal(span.links[0]?.context.spanId, "b7ad6b7169203331");
    assert.equal(span.ended, true);
    assert.equal(span.status, undefined);
    assert.deepEqual(active, span.context, "the handler runs inside the span");
  });

  test("through the server: enqueued with a traceparent, a failure recorded as ERROR", async () => {
    const c = client();
    const queue = unique("traced");
    const ok = await c.enqueue({ kind: "ok", queue }, { traceparent });
    const bad = await c.enqueue({ kind: "bad", queue, max_attempts: 1 });
    let carried: string | undefined;
    await work(
      c,
      queue,
      {
        ok: (job) => {
          carried = job.traceparent;
          return null;
        },
        bad: () => {
          throw new TypeError("no good");
        },
      },
      [ok.id, bad.id],
    );
    const mine = spans.filter((s) => s.name === `process ${queue}`);
    assert.equal(mine.length, 2);
    const okSpan = mine.find((s) => s.attributes["messaging.message.id"] === String(ok.id));
    const badSpan = mine.find((s) => s.attributes["messaging.message.id"] === String(bad.id));
    assert.ok(okSpan && badSpan);
    // A server that keeps trace context hands the traceparent back in the
    // claim, and the span continues that trace; one that does not leaves
    // the field out, and the span is a root.
    if (carried !== undefined) {
      assert.equal(carried, traceparent);
      assert.equal(okSpan.parent?.traceId, traceId);
    } else {
      assert.equal(okSpan.parent, undefined);
    }
    assert.equal(badSpan.parent, undefined);
    assert.equal(badSpan.links.length, 0, "a job enqueued outside a trace: no link");
    assert.equal(badSpan.attributes["readpast.job.outcome"], "failed");
    assert.equal(okSpan.attributes["readpast.job.outcome"], "succeeded");
    assert.equal(badSpan.status?.code, api.SpanStatusCode.ERROR);
    assert.equal(badSpan.status?.message, "no good");
    assert.ok(badSpan.exceptions[0] instanceof TypeError);
    assert.equal(okSpan.status, undefined);
    assert.ok(mine.every((s) => s.ended));
  });
});

function json(body: unknown): Response {
  return new Response(JSON.stringify(body), { headers: { "Content-Type": "application/json" } });
}
