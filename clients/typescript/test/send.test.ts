// The transport on Node: without options.fetch, requests go through
// node:http on kept-alive connections, with the same answers, errors,
// timeouts and aborts as through fetch. Each test answers from a small
// node:http server of its own on 127.0.0.1.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { after, describe, test } from "node:test";

import { ApiError, Client, NetworkError, RequestTimeoutError } from "@readpast/client";

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

/** A server on a free port answering with handler; counts connections. */
async function stub(handler: Handler): Promise<{ url: string; connections: () => number; server: Server }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => handler(req, body, res));
  });
  server.on("connection", (s: Socket) => {
    connections++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, connections: () => connections, server };
}

describe("transport through node:http", () => {
  test("sends method, path, query, headers and a body of any characters; reads JSON; keeps one connection", async () => {
    const seen: { ua: string | undefined; method: string | undefined; url: string | undefined; auth: string | undefined; length: string | undefined; body: string }[] = [];
    const s = await stub((req, body, res) => {
      seen.push({ ua: req.headers["user-agent"], method: req.method, url: req.url, auth: req.headers.authorization, length: req.headers["content-length"], body });
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ id: 7, queue: "q", kind: "é", state: "pending" }));
    });
    const c = new Client(s.url, { token: "t0k3n-t0k3n-t0k3n-t0k3n" });
    const job = await c.enqueue({ kind: "é ✓", queue: "q", payload: { s: "日本" } });
    assert.equal(job.id, 7);
    await c.getJob(7);
    // Node's fetch sends "node".
    assert.match(seen[0]?.ua ?? "", /^readpast-client-ts\//, "sent through node:http, not fetch");
    assert.equal(seen[0]?.method, "POST");
    assert.equal(seen[0]?.url, "/v1/jobs");
    assert.equal(seen[0]?.auth, "Bearer t0k3n-t0k3n-t0k3n-t0k3n");
    assert.equal(Number(seen[0]?.length), Buffer.byteLength(seen[0]?.body ?? ""));
    assert.deepEqual(JSON.parse(seen[0]?.body ?? "").payload, { s: "日本" });
    assert.equal(seen[1]?.method, "GET");
    assert.equal(seen[1]?.url, "/v1/jobs/7");
    assert.equal(s.connections(), 1, "the second request reuses the kept connection");
  });

  test("a name . or .. goes as written, under the base URL's path", async () => {
    const seen: (string | undefined)[] = [];
    const s = await stub((req, _body, res) => {
      seen.push(req.url);
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ name: "x", paused: true }));
    });
    await new Client(s.url).pauseQueue(".");
    await new Client(s.url + "/api").resumeQueue("..");
    await new Client(s.url).getLimit("..");
    assert.deepEqual(seen, ["/v1/queues/%2E/pause", "/api/v1/queues/%2E%2E/resume", "/v1/limits/%2E%2E"]);
  });

  test("an error answer is the ApiError of its code, with Retry-After", async () => {
    const s = await stub((_req, _body, res) => {
      res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "4" });
      res.end(JSON.stringify({ error: { code: "unavailable", message: "database down" } }));
    });
    await assert.rejects(new Client(s.url).stats(), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 503);
      assert.equal(e.code, "unavailable");
      assert.equal(e.retryAfter, 4);
      return true;
    });
  });

  test("no answer within timeoutMs, or a body that stops: RequestTimeoutError", async () => {
    const silent = await stub(() => {});
    const started = Date.now();
    await assert.rejects(new Client(silent.url, { timeoutMs: 200 }).stats(), RequestTimeoutError);
    assert.ok(Date.now() - started < 2000);

    const stalled = await stub((_req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "100" });
      res.write('{"queues":');
    });
    await assert.rejects(new Client(stalled.url, { timeoutMs: 200 }).stats(), RequestTimeoutError);
  });

  test("a connection cut in the body, or refused: NetworkError", async () => {
    const cut = await stub((req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "100" });
      res.write('{"queues":', () => req.socket.destroy());
    });
    await assert.rejects(new Client(cut.url).stats(), NetworkError);

    const gone = await stub(() => {});
    const url = gone.url;
    await new Promise<void>((r) => gone.server.close(() => r()));
    await assert.rejects(new Client(url, { timeoutMs: 2000 }).stats(), NetworkError);
  });

  test("an abort before the answer rejects with its reason; after the headers it no longer counts", async () => {
    const hang = await stub(() => {});
    const ctrl = new AbortController();
    const why = new Error("not wanted any more");
    const call = new Client(hang.url).stats({ signal: ctrl.signal });
    setTimeout(() => ctrl.abort(why), 50);
    await assert.rejects(call, (e: unknown) => e === why);

    // Headers at once, the body a second later: an abort in between (the
    // headers have had half a second to arrive, even on a busy machine)
    // is too late, and the answer is read.
    const slow = await stub((_req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.flushHeaders();
      setTimeout(() => res.end(JSON.stringify({ queues: [] })), 1000);
    });
    const late = new AbortController();
    const answered = new Client(slow.url).stats({ signal: late.signal });
    setTimeout(() => late.abort(new Error("too late")), 500);
    assert.deepEqual(await answered, { queues: [] });
  });

  test("clients share kept connections; an upper-case scheme works; header values are trimmed as fetch does", async () => {
    const auths: (string | undefined)[] = [];
    const s = await stub((req, _body, res) => {
      auths.push(req.headers.authorization);
      res.end("\uFEFF" + JSON.stringify({ queues: [] }));
    });
    await new Client(s.url, { token: "t0k3n-t0k3n-t0k3n-t0k3n\n" }).stats();
    const answer = await new Client(s.url.replace("http:", "HTTP:")).stats();
    assert.deepEqual(answer, { queues: [] }, "a leading BOM is dropped, as fetch's text() does");
    assert.equal(auths[0], "Bearer t0k3n-t0k3n-t0k3n-t0k3n");
    assert.equal(s.connections(), 1, "the second client reuses the first one's connection");
  });

  test("redirects: 307 and 308 are followed with the body, Authorization kept to the same origin only; a 302 to a POST is returned", async () => {
    const seen: { url: string | undefined; auth: string | undefined; body: string }[] = [];
    const other = await stub((req, body, res) => {
      seen.push({ url: req.url, auth: req.headers.authorization, body });
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ id: 9, queue: "q", kind: "k", state: "pending" }));
    });
    const first = await stub((req, body, res) => {
      seen.push({ url: req.url, auth: req.headers.authorization, body });
      if (req.url === "/v1/jobs") res.writeHead(308, { Location: "/moved/v1/jobs" });
      else if (req.url === "/moved/v1/jobs") res.writeHead(307, { Location: `${other.url}/v1/jobs` });
      else res.writeHead(302, { Location: "/elsewhere" });
      res.end();
    });
    const c = new Client(first.url, { token: "t0k3n-t0k3n-t0k3n-t0k3n" });
    const job = await c.enqueue({ kind: "k", queue: "q" });
    assert.equal(job.id, 9);
    assert.deepEqual(
      seen.map((x) => [x.url, x.auth !== undefined, JSON.parse(x.body).kind]),
      [
        ["/v1/jobs", true, "k"],
        ["/moved/v1/jobs", true, "k"],
        ["/v1/jobs", false, "k"],
      ],
    );
    await assert.rejects(c.claim({ worker: "w", queues: ["q"] }), (e: unknown) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 302);
      return true;
    });
  });
});


describe("header values no HTTP header can carry", () => {
  test("are refused before anything is sent, naming the header but not the token", async () => {
    let seen = 0;
    const s = await stub((req, _body, res) => {
      seen++;
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ auth: req.headers.authorization }));
    });
    // A token read from a file keeps its newline: sent without it.
    const c = new Client(s.url, { token: "t0k3n-t0k3n-t0k3n\n" });
    assert.deepEqual(await c.stats(), { auth: "Bearer t0k3n-t0k3n-t0k3n" });
    for (const token of ["t0k3n-ключ-t0k3n", "t0k3n t0k3n", "t0k3n\r\nX-Evil: 1"]) {
      assert.throws(() => new Client(s.url, { token }), (e: unknown) => e instanceof TypeError && !e.message.includes("t0k3n"));
    }
    for (const key of ["ключ", "a\r\nX-Evil: 1"]) {
      await assert.rejects(c.enqueue({ kind: "k" }, { idempotencyKey: key }), (e: unknown) => e instanceof TypeError && e.message.includes("Idempotency-Key"));
    }
    assert.equal(seen, 1, "only the first request was sent");
  });
});
