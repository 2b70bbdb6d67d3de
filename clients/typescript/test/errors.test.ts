// Errors: every error answer becomes the class of its code, with its
// status, code, field and Retry-After; no answer is a NetworkError.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import {
  AccessDeniedError,
  ApiError,
  Client,
  ConflictError,
  ForbiddenError,
  InvalidFieldError,
  InvalidInputError,
  MalformedJsonError,
  NetworkError,
  RequestTimeoutError,
  StaleClaimError,
  TooLargeError,
  UnauthorizedError,
  UnavailableError,
  errorClasses,
  errorFromResponse,
} from "@readpast/client";

import { client, readToken, serverURL, unique } from "./support.js";

const c = client();

/** Rejects with an error of cls and checks its fields. */
async function rejectsWith(
  p: Promise<unknown>,
  cls: abstract new (...args: never[]) => ApiError,
  want: { status: number; code: string; field?: string },
): Promise<ApiError> {
  let got: unknown;
  await assert.rejects(p, (e: unknown) => {
    got = e;
    return true;
  });
  assert.ok(got instanceof cls, `want ${cls.name}, got ${String(got)}`);
  const e = got as ApiError;
  assert.equal(e.status, want.status);
  assert.equal(e.code, want.code);
  if (want.field !== undefined) assert.equal(e.field, want.field);
  assert.equal(e.name, (got as object).constructor.name);
  return e;
}

describe("validation answers", () => {
  test("invalid fields name the field, and nothing is enqueued", async () => {
    const queue = unique("q");
    await rejectsWith(c.enqueue({ kind: "k", queue, priority: 5000 }), InvalidFieldError, {
      status: 400,
      code: "invalid_field",
      field: "priority",
    });
    await rejectsWith(c.enqueue({ kind: "k", queue, max_attempts: 0 }), InvalidFieldError, {
      status: 400,
      code: "invalid_field",
      field: "max_attempts",
    });
    await rejectsWith(c.enqueue({ kind: "two words", queue }), InvalidFieldError, {
      status: 400,
      code: "invalid_field",
      field: "kind",
    });
    await rejectsWith(c.enqueue({ kind: "k", queue, unique_for_seconds: 60 }), InvalidFieldError, {
      status: 400,
      code: "invalid_field",
    });
    await rejectsWith(c.claim({ worker: "w", queues: [] }), InvalidInputError, {
      status: 400,
      code: "invalid_field",
      field: "queues",
    });
    await rejectsWith(c.listJobs({ queue, limit: 0 }), InvalidFieldError, {
      status: 400,
      code: "invalid_field",
      field: "limit",
    });
    assert.equal((await c.listJobs({ queue })).jobs.length, 0);
  });

  test("a body that is not JSON is MalformedJsonError", async () => {
    const broken = client({ fetch: (input, init) => fetch(input, { ...init, body: "{" }) });
    await rejectsWith(broken.enqueue({ kind: "k" }), MalformedJsonError, { status: 400, code: "malformed_json" });
  });

  test("input no server takes is refused before it is sent", async () => {
    let sent = 0;
    const counting = client({
      fetch: (input, init) => {
        sent++;
        return fetch(input, init);
      },
    });
    await assert.rejects(counting.enqueue({ kind: "k", payload: { x: NaN } }), TypeError);
    await assert.rejects(counting.enqueue({ kind: "k", payload: { x: 10n } }), TypeError);
    await assert.rejects(counting.enqueue({ kind: "k", run_at: new Date("nope") }), RangeError);
    await assert.rejects(counting.getJob(1.5), TypeError);
    await assert.rejects(counting.getSchedule(""), TypeError);
    assert.equal(sent, 0);
    assert.throws(() => new Client("ftp://x"), TypeError);
    assert.throws(() => new Client("http://x/?a=1"), TypeError);
  });
});

describe("access", () => {
  test("a wrong token is UnauthorizedError", async () => {
    const wrong = new Client(serverURL, { token: "0123456789abcdef-not-a-valid-token" });
    await rejectsWith(wrong.stats(), UnauthorizedError, { status: 401, code: "unauthorized" });
  });

  test("a read token may read, not write: ForbiddenError", async () => {
    const reader = new Client(serverURL, { token: readToken });
    assert.equal(typeof (await reader.stats()).totals.pending, "number");
    const e = await rejectsWith(reader.enqueue({ kind: "k" }), ForbiddenError, { status: 403, code: "forbidden" });
    assert.ok(e instanceof AccessDeniedError);
  });
});

describe("no answer", () => {
  test("an unreachable server is a NetworkError", async () => {
    const nowhere = new Client("http://127.0.0.1:1", { timeoutMs: 5000 });
    await assert.rejects(nowhere.stats(), (e: unknown) => {
      assert.ok(e instanceof NetworkError, String(e));
      assert.ok(!(e instanceof ApiError));
      assert.match(e.message, /GET \/v1\/stats/);
      return true;
    });
    assert.equal(await nowhere.healthy(), false);
    assert.equal(await nowhere.ready(), false);
  });

  test("past timeoutMs a call is RequestTimeoutError; an abort rejects with its reason", async () => {
    const hanging = client({
      timeoutMs: 200,
      fetch: (_input, init) =>
        new Promise((_resolve, reject) => init?.signal?.addEventListener("abort", () => reject(init.signal?.reason))),
    });
    const started = Date.now();
    await assert.rejects(hanging.stats(), RequestTimeoutError);
    assert.ok(Date.now() - started < 2000);

    const ctrl = new AbortController();
    const why = new Error("not wanted any more");
    const claiming = c.claim({ worker: "w", queues: [unique("q")], wait_seconds: 30 }, { signal: ctrl.signal });
    setTimeout(() => ctrl.abort(why), 100);
    await assert.rejects(claiming, (e: unknown) => e === why);
  });

  test("an answer that is not the API's: by status, code http_error", async () => {
    const proxy = client({
      fetch: async () =>
        new Response("<html>bad gateway</html>", { status: 502, headers: { "Retry-After": "3" } }),
    });
    const e = await rejectsWith(proxy.stats(), ApiError, { status: 502, code: "http_error" });
    assert.equal(e.retryAfter, 3);
    assert.match(e.detail, /bad gateway/);
    const garbled = client({ fetch: async () => new Response("{not json", { status: 200 }) });
    await assert.rejects(garbled.stats(), NetworkError);
  });
});

describe("error classes", () => {
  test("one class per code of the API's Error schema", () => {
    const doc = JSON.parse(readFileSync(new URL("../../../../httpapi/openapi.json", import.meta.url), "utf8")) as {
      components: { schemas: { Error: { properties: { error: { properties: { code: { enum: string[] } } } } } } };
    };
    const codes = doc.components.schemas.Error.properties.error.properties.code.enum;
    assert.deepEqual(Object.keys(errorClasses).sort(), [...codes].sort());
    const names = new Set<string>();
    for (const code of codes) {
      const e = errorFromResponse({ status: 418, code, message: "m" });
      assert.equal(e.code, code);
      assert.ok(e instanceof ApiError);
      assert.notEqual(e.constructor, ApiError, `${code} has a class of its own`);
      names.add(e.name);
    }
    assert.equal(names.size, codes.length);
    assert.ok(errorFromResponse({ status: 409, code: "stale_token", message: "" }) instanceof StaleClaimError);
    // A code this client does not know: the class of its status.
    assert.ok(errorFromResponse({ status: 409, code: "new_conflict", message: "" }) instanceof ConflictError);
    assert.ok(errorFromResponse({ status: 413, code: "new_limit", message: "" }) instanceof TooLargeError);
    assert.ok(errorFromResponse({ status: 503, code: "x", message: "", retryAfter: 2 }) instanceof UnavailableError);
    assert.equal(errorFromResponse({ status: 418, code: "teapot", message: "" }).constructor, ApiError);
  });
});
