// The client's transport: one HTTP request to the API, its timeout and
// abort, and the answer as JSON or as the ApiError of its error code.

import { NetworkError, RequestTimeoutError, errorFromResponse, type ApiError } from "./errors.js";
import { HALF_CLOSED_MS, TIMED_OUT, headerValue, type Answer, type Send } from "./send.js";
import type { ErrorBody } from "./types.js";

/** Where and how a client sends its requests. */
export interface Transport {
  /** The server's base URL, without a trailing slash. */
  url: string;
  timeoutMs: number;
  token: string | undefined;
  /** How requests go out (send.ts). */
  send: Send;
  headers: Record<string, string>;
}

/** Throws a TypeError unless url is an http:// or https:// URL without a
 * query or fragment: a server's base URL. */
export function checkBaseURL(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`url must be an http:// or https:// URL, not ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new TypeError(`url must be an http:// or https:// URL, not ${JSON.stringify(url)}`);
  }
  if (parsed.search || parsed.hash) {
    throw new TypeError(`url must not have a query or fragment: ${JSON.stringify(url)}`);
  }
}

/** A query string's parameters; undefined ones are left out. */
export type Query = Record<string, string | number | boolean | undefined>;

/** One request's parts besides its method and path. */
export interface Call {
  body?: unknown;
  query?: Query | undefined;
  headers?: Record<string, string> | undefined;
  /** Aborts the request while no answer came; it then rejects with the
   * signal's reason. Once the answer's headers are in, its body is read
   * whatever the signal does (the server has acted), for 3 s at most
   * after the abort.
   * Through node:http, an abort after the request was sent closes the
   * connection's sending side and waits a moment for an answer already
   * on its way, which is then the request's answer. An abort whose reason
   * is TIMED_OUT (the worker's, when the time for a call is up) ends the
   * request at once, as its timeout does, headers in or not, and it
   * rejects with a RequestTimeoutError. */
  signal?: AbortSignal | undefined;
  /** Overrides the transport's timeoutMs. */
  timeoutMs?: number | undefined;
}

/**
 * Sends one request and resolves with the answer's JSON (undefined for
 * none), or rejects: with the ApiError subclass of an error answer's code,
 * with a NetworkError when no usable answer came (RequestTimeoutError past
 * the timeout), or with the signal's reason when the caller aborted before
 * the answer's headers came. After they came, an abort bounds the read:
 * the server has done what was asked (a claim has claimed its jobs), and
 * the answer is read, within the timeout and within HALF_CLOSED_MS of the
 * abort, past which the request rejects with the signal's reason.
 */
export async function request<T>(tr: Transport, method: string, path: string, call: Call = {}): Promise<T> {
  let url = tr.url + path;
  if (call.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(call.query)) {
      if (v !== undefined) q.set(k, String(v));
    }
    const s = q.toString();
    if (s) url += "?" + s;
  }
  const headers: Record<string, string> = { Accept: "application/json", ...tr.headers, ...call.headers };
  let body: string | undefined;
  if (call.body !== undefined) {
    body = toJSON(call.body);
    headers["Content-Type"] = "application/json";
  }
  if (tr.token) headers["Authorization"] = "Bearer " + tr.token;
  for (const [k, v] of Object.entries(headers)) {
    // What fetch and node:http would refuse as they send, and report as a
    // failure of the network: a header value is bytes, without line breaks.
    if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(headerValue(v))) {
      throw new TypeError(`${method} ${path}: the ${k} header holds a character no HTTP header can carry`);
    }
  }
  tr.send.check?.(method, url);

  const outer = call.signal;
  const timeoutMs = call.timeoutMs ?? tr.timeoutMs;
  const cutOff = (cause?: unknown): RequestTimeoutError =>
    new RequestTimeoutError(`${method} ${path}: no answer in the time left for it`, { cause });
  if (outer?.aborted) throw outer.reason === TIMED_OUT ? cutOff() : outer.reason;
  const ctrl = new AbortController();
  let timedOut = false;
  let cut = false; // the caller's time is up (an abort with TIMED_OUT)
  const timer = setTimeout(() => {
    timedOut = true;
    ctrl.abort(TIMED_OUT);
  }, timeoutMs);
  // The caller's abort ends the wait for the answer's headers at once;
  // after them, the answer's body has HALF_CLOSED_MS to end.
  let answered = false;
  let aborted = false;
  let giveUp: ReturnType<typeof setTimeout> | undefined;
  const onAbort = (): void => {
    if (outer?.reason === TIMED_OUT) {
      cut = true;
      ctrl.abort(TIMED_OUT);
      return;
    }
    if (answered) {
      giveUp ??= setTimeout(() => {
        aborted = true;
        ctrl.abort(outer?.reason);
      }, HALF_CLOSED_MS);
      return;
    }
    aborted = true;
    ctrl.abort(outer?.reason);
  };
  outer?.addEventListener("abort", onAbort, { once: true });
  const failed = (e: unknown, what: string): unknown => {
    if (aborted) return outer?.reason;
    if (cut) return cutOff(e);
    if (timedOut) return new RequestTimeoutError(`${method} ${path}: no answer within ${timeoutMs} ms`, { cause: e });
    return new NetworkError(`${method} ${path}: ${what}: ${describe(e)}`, { cause: e });
  };
  try {
    let res: Answer;
    try {
      // `answered` is set by the first reaction to the headers, before an
      // abort can run between their arrival and this function going on.
      res = await tr.send(method, url, headers, body, ctrl.signal).then((r) => {
        answered = !aborted;
        return r;
      });
    } catch (e) {
      throw failed(e, "no answer");
    }
    let text: string;
    try {
      text = await res.text();
    } catch (e) {
      throw failed(e, "reading the answer");
    }
    // An answer that came after the caller's abort counts only if it
    // carries something (a claim's jobs): the server's empty answer to a
    // client it saw go is the abort's.
    if (aborted && (res.status < 200 || res.status > 299 || text === "")) throw outer?.reason;
    if (res.status < 200 || res.status > 299) throw errorOf(res, text);
    if (res.status === 204 || text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new NetworkError(`${method} ${path}: the answer is not JSON: ${describe(e)}`, { cause: e });
    }
  } finally {
    clearTimeout(timer);
    clearTimeout(giveUp);
    outer?.removeEventListener("abort", onAbort);
  }
}

/** JSON of a request body; NaN and infinities, which JSON.stringify would
 * quietly send as null, are refused. */
function toJSON(v: unknown): string {
  return JSON.stringify(v, (k, x: unknown) => {
    if (typeof x === "number" && !Number.isFinite(x)) {
      throw new TypeError(`the request is not JSON: ${k || "a value"} is ${x}`);
    }
    return x;
  });
}

function errorOf(res: Answer, text: string): ApiError {
  const header = res.header("Retry-After");
  const ra = Number(header);
  const retryAfter = header !== null && Number.isFinite(ra) && ra >= 0 ? ra : undefined;
  try {
    const err = (JSON.parse(text) as Partial<ErrorBody>).error;
    if (err && typeof err.code === "string") {
      return errorFromResponse({
        status: res.status,
        code: err.code,
        message: String(err.message ?? ""),
        field: typeof err.field === "string" ? err.field : undefined,
        retryAfter,
      });
    }
  } catch {
    // not the API's error shape: a proxy's page
  }
  return errorFromResponse({
    status: res.status,
    code: "http_error",
    message: text.trim().slice(0, 500) || res.statusText,
    retryAfter,
  });
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as { cause?: unknown }).cause;
    const c = cause instanceof Error ? `: ${cause.message}` : "";
    return `${e.message}${c}`;
  }
  return String(e);
}

/** The token as sent: without leading or trailing whitespace (a token read
 * from a file keeps its newline); one of other than printable ASCII is
 * refused, without showing it. */
export function bearer(token: string | undefined): string | undefined {
  if (!token) return undefined;
  const t = headerValue(token);
  if (!/^[\x21-\x7e]+$/.test(t)) {
    throw new TypeError("options.token must be printable ASCII without spaces (the token is not shown)");
  }
  return t;
}
