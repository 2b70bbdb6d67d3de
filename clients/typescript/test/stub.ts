// A stub of readpast's HTTP API for the tests of a worker's shutdown: a raw
// HTTP/1.1 server on node:net that answers each request as the test's route
// says, or never (a stalled server: it ignores the client's half-close and
// keeps the connection open), and records each request with when the
// client ended its connection.

import { createServer, type Socket } from "node:net";
import type { TestContext } from "node:test";

/** One request the stub got. */
export interface StubRequest {
  method: string;
  path: string;
  body: unknown;
  /** Date.now() when it came. */
  at: number;
  /** Resolves with Date.now() when the client ended its side of the
   * request's connection: closed it, or half-closed it. */
  ended: Promise<number>;
}

/** How the stub answers a request: a status (200 by default) with a JSON
 * body and headers, or "stall": never. */
export type StubAnswer = { status?: number; body?: unknown; headers?: Record<string, string> } | "stall";

/** A stub server, closed (its connections destroyed) when the test ends. */
export interface Stub {
  url: string;
  requests: StubRequest[];
  /** The requests whose path includes part. */
  to(part: string): StubRequest[];
}

/** Starts a stub that answers each request with route(request, n), n
 * counting the requests to the same path before it (0 for the first). */
export async function stubServer(t: TestContext, route: (req: StubRequest, n: number) => StubAnswer): Promise<Stub> {
  const requests: StubRequest[] = [];
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.on("error", () => {});
    s.on("close", () => sockets.delete(s));
    const ended = new Promise<number>((r) => s.on("end", () => r(Date.now())));
    let buf = Buffer.alloc(0);
    let stalled = false;
    s.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (stalled) return;
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end).toString("latin1").split("\r\n");
        const length = Number(/^content-length:\s*(\d+)/im.exec(head.join("\n"))?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        const text = buf.subarray(end + 4, end + 4 + length).toString("utf8");
        buf = buf.subarray(end + 4 + length);
        const [method = "", path = ""] = (head[0] ?? "").split(" ");
        const req: StubRequest = { method, path, body: text ? JSON.parse(text) : undefined, at: Date.now(), ended };
        const n = requests.filter((r) => r.path === path).length;
        requests.push(req);
        const answer = route(req, n);
        if (answer === "stall") {
          stalled = true;
          return;
        }
        const body = JSON.stringify(answer.body ?? {});
        const headers = { "Content-Type": "application/json", "Content-Length": String(Buffer.byteLength(body)), ...answer.headers };
        const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
        s.write(`HTTP/1.1 ${answer.status ?? 200} Stub\r\n${lines.join("")}\r\n${body}`);
      }
    });
    // The client's half-close: a stalled request ignores it; otherwise the
    // stub closes its side too, as a server does.
    s.on("end", () => {
      if (!stalled) s.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    requests,
    to: (part) => requests.filter((r) => r.path.includes(part)),
  };
}

/** A job as a claim's answer carries it. */
export function claimedJob(id: number, queue: string): Record<string, unknown> {
  return {
    id,
    token: `token-${id}`,
    kind: "k",
    queue,
    payload: {},
    state: "running",
    priority: 0,
    attempt: 1,
    max_attempts: 3,
    created_at: new Date().toISOString(),
    run_at: new Date().toISOString(),
  };
}

/** An API error body. */
export function apiError(code: string, message: string): { error: { code: string; message: string } } {
  return { error: { code, message } };
}
