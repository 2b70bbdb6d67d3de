// How a request goes out: through fetch, or, on Node, through node:http
// on kept-alive connections, which costs a worker about 40% less CPU per
// job than fetch does (README, "Throughput").

import { VERSION } from "./version.js";

/** The parts of an answer the transport reads. */
export interface Answer {
  status: number;
  statusText: string;
  /** A header's value, null when absent. */
  header(name: string): string | null;
  /** The body as text; rejects when it cannot be read whole (the signal
   * aborted, the connection dropped). */
  text(): Promise<string>;
}

/** Sends one request; resolves once the answer's headers are in. Aborting
 * signal before then rejects with the signal's reason or an AbortError;
 * after, makes the body's text() reject. check, when set, throws a
 * TypeError for a request it cannot send as asked; the transport calls it
 * before anything is sent. */
export type Send = ((
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal,
) => Promise<Answer>) & { check?: (method: string, url: string) => void };

/** The path and query of url as written, when it is one node:http can
 * send: the URL parser takes a segment "%2E" or "%2E%2E" (a name "." or
 * "..", as segment() encodes it) for "." or ".." and drops it, with the
 * segment before it for "..". Undefined when url has no such segment. */
export function dotPath(url: string): string | undefined {
  const authority = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(url);
  if (authority === null) return undefined;
  const rest = url.slice(authority[0].length);
  const path = rest.split(/[?#]/, 1)[0] ?? "";
  if (!path.split("/").some((seg) => /^(%2e){1,2}$/i.test(seg))) return undefined;
  return /^\/[\x21-\x7e]*$/.test(rest) ? rest : undefined;
}

/** A Send through f, a fetch. A URL with a segment "%2E" or "%2E%2E" (a
 * queue, schedule or key named "." or "..") is refused with a TypeError,
 * nothing sent: fetch would send it to another path. */
export function fetchSend(f: typeof globalThis.fetch): Send {
  const send: Send = async (method, url, headers, body, signal) => {
    // Called unbound: a browser's fetch refuses any `this` but the global one.
    const res = await f(url, { method, headers, body: body ?? null, signal });
    return {
      status: res.status,
      statusText: res.statusText,
      header: (name) => res.headers.get(name),
      text: () => res.text(),
    };
  };
  send.check = (method, url) => {
    if (dotPath(url) !== undefined) {
      throw new TypeError(`${method} ${url}: a name "." or ".." cannot be sent through fetch, which takes it for a folder; use node:http (no options.fetch on Node)`);
    }
  };
  return send;
}

/** Whether this is Node itself: not Deno or Bun, which offer node:http
 * too and whose fetch is their own, nor a runtime that reports a Node
 * version for compatibility but is no Node (Cloudflare's workerd: its
 * navigator says so; Node 21 and later name themselves there). */
export function onNode(): boolean {
  const g = globalThis as {
    process?: { versions?: Record<string, string | undefined> };
    Deno?: unknown;
    navigator?: { userAgent?: unknown };
  };
  const v = g.process?.versions;
  if (typeof v?.node !== "string" || v.bun !== undefined || g.Deno !== undefined) return false;
  const ua = g.navigator?.userAgent;
  return g.navigator === undefined || (typeof ua === "string" && ua.startsWith("Node.js"));
}

// The parts of node:http and node:https used here (the package compiles
// without Node's types, so that it does not depend on them).
interface NodeSocket {
  on(event: "error", f: (e: unknown) => void): void;
  end(): void;
}
interface NodeIncoming {
  statusCode?: number;
  statusMessage?: string;
  headers: Record<string, string | string[] | undefined>;
  setEncoding(enc: string): void;
  on(event: "data", f: (chunk: string) => void): void;
  on(event: "end" | "close", f: () => void): void;
  on(event: "error", f: (e: unknown) => void): void;
  resume(): void;
}
interface NodeRequest {
  on(event: "response", f: (res: NodeIncoming) => void): void;
  on(event: "socket", f: (s: NodeSocket) => void): void;
  on(event: "error", f: (e: unknown) => void): void;
  on(event: "finish", f: () => void): void;
  end(body?: Uint8Array): void;
  destroy(e?: unknown): void;
  /** Whether the socket goes back to the agent once the answer is read. */
  shouldKeepAlive: boolean;
}
interface NodeHttp {
  Agent: new (opts: { keepAlive: boolean; timeout: number }) => unknown;
  request(url: URL, opts: { method: string; headers: Record<string, string>; agent: unknown; path?: string }): NodeRequest;
}

/** How long a kept connection may stay idle before it is closed: as
 * Node's fetch does, well inside the idle timeouts of servers and proxies
 * (Go's 120 s, 60-75 s for most proxies), so that a request is not sent
 * on a connection the server is closing. A socket timeout of Node's agent
 * closes only idle sockets: a long-poll claim held longer is not cut. */
const IDLE_MS = 4_000;

/** How long a request aborted after it was sent waits, its sending side
 * closed, for an answer already on its way to end (see once). */
export const HALF_CLOSED_MS = 3_000;

/** The reason a transport's timeout aborts a request with: a timed-out
 * request is destroyed, not half-closed, so that it ends when its time
 * is up (a heartbeat's, say) and never takes the server's empty answer
 * to a client that went away for a success. */
export const TIMED_OUT: unique symbol = Symbol("readpast: timed out");

/** The most redirects followed, as fetch does. */
const MAX_REDIRECTS = 20;

// node:http and node:https with their agents, shared by every client of
// the process (one pool of kept connections per server, as fetch has);
// loaded on first use, so that importing the package imports no node:
// module (a browser, say, never gets here). A failed load is tried again.
interface Loaded {
  http: NodeHttp;
  https: NodeHttp;
  agents: { http: unknown; https: unknown };
}
let loaded: Promise<Loaded> | undefined;
function load(): Promise<Loaded> {
  const http: string = "node:http";
  const https: string = "node:https";
  loaded ??= Promise.all([import(http) as Promise<NodeHttp>, import(https) as Promise<NodeHttp>]).then(
    ([h, s]) => ({
      http: h,
      https: s,
      agents: {
        http: new h.Agent({ keepAlive: true, timeout: IDLE_MS }),
        https: new s.Agent({ keepAlive: true, timeout: IDLE_MS }),
      },
    }),
    (e: unknown) => {
      loaded = undefined;
      throw e;
    },
  );
  return loaded;
}

// Sockets given a listener of their own for 'error': Node leaves a kept
// socket without one for a moment when an answer came before the request
// was written whole, and an 'error' then would be uncaught. The request's
// own errors reach it through its 'error' event as ever.
const guarded = new WeakSet<NodeSocket>();

const encoder = new TextEncoder();

/** A header value as fetch sends it: a string, without leading or
 * trailing HTTP whitespace (a token read from a file keeps its newline). */
export function headerValue(v: unknown): string {
  return String(v).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
}

/** A Send through node:http (node:https for https URLs) on the process's
 * kept-alive connections. It follows redirects as fetch does for the
 * requests readpast's API can be redirected safely: 307 and 308 for any
 * method (the body sent again), 301, 302 and 303 for GET; a 301, 302 or
 * 303 answer to another method is returned as it is (fetch would send the
 * request again as a GET, without its body). An Authorization header does
 * not follow a redirect to another origin. It sends a User-Agent of its
 * own unless one is given. */
export function nodeSend(): Send {
  return async (method, url, headers, body, signal) => {
    signal.throwIfAborted();
    const mods = await load();
    const bytes = body === undefined ? undefined : encoder.encode(body);
    const hs: Record<string, string> = {};
    for (const [k, v] of Object.entries(headers)) hs[k] = headerValue(v);
    if (!Object.keys(hs).some((k) => k.toLowerCase() === "user-agent")) hs["User-Agent"] = `readpast-client-ts/${VERSION}`;
    if (bytes !== undefined) hs["Content-Length"] = String(bytes.length);
    let target = new URL(url);
    // The path as written when the URL parser would drop a "." or ".."
    // name from it; a redirect's Location is taken as parsed.
    let path = dotPath(url);
    for (let hops = 0; ; hops++) {
      const answer = await once(mods, target, path, method, hs, bytes, signal);
      const location = answer.header("Location");
      const follow =
        location !== null &&
        hops < MAX_REDIRECTS &&
        (answer.status === 307 ||
          answer.status === 308 ||
          ((answer.status === 301 || answer.status === 302 || answer.status === 303) && method === "GET"));
      if (!follow) return answer;
      answer.discard();
      const next = new URL(location, target);
      if (next.origin !== target.origin) {
        for (const k of Object.keys(hs)) if (k.toLowerCase() === "authorization") delete hs[k];
      }
      target = next;
      path = undefined;
    }
  };
}

/** One request and its answer, to url (to path on url's server when
 * path is set); discard() drops an answer not read. */
function once(
  mods: Loaded,
  url: URL,
  path: string | undefined,
  method: string,
  headers: Record<string, string>,
  bytes: Uint8Array | undefined,
  signal: AbortSignal,
): Promise<Answer & { discard(): void }> {
  return new Promise((resolve, reject) => {
    signal.throwIfAborted();
    const secure = url.protocol === "https:";
    const req = (secure ? mods.https : mods.http).request(url, {
      method,
      headers,
      agent: secure ? mods.agents.https : mods.agents.http,
      ...(path === undefined ? {} : { path }),
    });
    let socket: NodeSocket | undefined;
    req.on("socket", (s) => {
      socket = s;
      if (!guarded.has(s)) {
        guarded.add(s);
        s.on("error", () => {});
      }
    });
    let sent = false; // the request is written whole: the server may act on it
    req.on("finish", () => (sent = true));
    // An abort before the request was sent, once the answer's headers are
    // in (ending the body's reading), or for a timeout (TIMED_OUT),
    // destroys the request. The caller's abort after it was sent closes
    // only the connection's sending side: the server sees the client go
    // and acts on nothing more (a long-poll claim claims nothing), but an
    // answer it had already sent (jobs it had claimed) still arrives, and
    // is the request's answer; destroyed, it would be dropped, and its
    // jobs would run for no one until their lease ran out. The connection
    // is not kept for reuse, and is destroyed if the answer has not ended
    // within HALF_CLOSED_MS.
    let answered = false;
    let giveUp: ReturnType<typeof setTimeout> | undefined;
    let fail = (e: unknown): void => {
      clearTimeout(giveUp);
      reject(e);
    };
    const onAbort = (): void => {
      const reason: unknown = signal.reason;
      if (answered || !sent || socket === undefined || reason === TIMED_OUT) {
        req.destroy(reason);
        fail(reason);
        return;
      }
      req.shouldKeepAlive = false;
      socket.end();
      giveUp = setTimeout(() => {
        req.destroy(reason);
        fail(reason);
      }, HALF_CLOSED_MS);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    req.on("error", (e) => fail(e));
    req.on("response", (res) => {
      answered = true;
      res.setEncoding("utf8");
      let text = "";
      let ended = false;
      let failure: unknown;
      let waiting: { ok: (t: string) => void; ko: (e: unknown) => void } | undefined;
      const settle = (): void => {
        if (!waiting) return;
        if (failure !== undefined) waiting.ko(failure);
        else if (ended) waiting.ok(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
      };
      fail = (e) => {
        failure ??= e ?? new Error("the answer was cut short");
        settle();
      };
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => {
        ended = true;
        clearTimeout(giveUp);
        signal.removeEventListener("abort", onAbort);
        settle();
      });
      res.on("error", (e) => fail(e));
      res.on("close", () => {
        if (!ended) fail(new Error("the connection closed before the answer's end"));
      });
      const first = (name: string): string | null => {
        const v = res.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? (v[0] ?? null) : v;
      };
      resolve({
        status: res.statusCode ?? 0,
        statusText: res.statusMessage ?? "",
        header: first,
        text: () =>
          new Promise<string>((ok, ko) => {
            waiting = { ok, ko };
            settle();
          }),
        discard: () => {
          signal.removeEventListener("abort", onAbort);
          res.resume();
        },
      });
    });
    req.end(bytes);
  });
}
