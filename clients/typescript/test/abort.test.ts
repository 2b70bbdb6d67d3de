// Aborts and timeouts through node:http against a server that behaves as
// Go's does when the client closes its sending side: it answers then (an
// empty 200, or an answer that stalls). A caller's abort after the request
// was sent half-closes the connection and reads an answer on its way, for
// at most a few seconds; a timeout destroys the request.

import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { after, describe, test } from "node:test";

import { Client, RequestTimeoutError } from "@readpast/client";

/** A raw HTTP server that writes answer once the client half-closes. */
async function onHalfClose(answer: string): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.on("error", () => {});
    s.on("data", () => {});
    s.on("end", () => s.write(answer));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** A raw HTTP server that writes answer as soon as a request comes, and
 * nothing more. */
async function answersAtOnce(answer: string): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.on("error", () => {});
    s.once("data", () => s.write(answer));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe("aborts after the request was sent", () => {
  test("an answer whose body stalls after its headers came ends within a few seconds of the caller's abort", async () => {
    const url = await answersAtOnce('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"jobs":[');
    const c = new Client(url, { timeoutMs: 60_000 });
    const ctrl = new AbortController();
    const why = new Error("stopping");
    const claim = c.claim({ worker: "w", wait_seconds: 30 }, { signal: ctrl.signal });
    setTimeout(() => ctrl.abort(why), 300); // the headers are in by then
    const began = Date.now();
    const late = new Promise((_, ko) => setTimeout(() => ko(new Error("still pending after 8 s")), 8_000).unref());
    await assert.rejects(Promise.race([claim, late]), (e: unknown) => e === why);
    assert.ok(Date.now() - began < 6_000);
  });

  test("a timeout is a RequestTimeoutError, never the empty answer to a client that went away", async () => {
    const url = await onHalfClose("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    const c = new Client(url, { timeoutMs: 200 });
    const began = Date.now();
    await assert.rejects(c.getJob(1), RequestTimeoutError);
    await assert.rejects(c.heartbeat(1, "t"), RequestTimeoutError);
    assert.ok(Date.now() - began < 2_000, "the timeouts took their time");
  });

  test("an answer that stalls after the caller's abort ends within a few seconds with the abort's reason", async () => {
    const url = await onHalfClose('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"jobs":[');
    const c = new Client(url, { timeoutMs: 60_000 });
    const ctrl = new AbortController();
    const why = new Error("stopping");
    const claim = c.claim({ worker: "w", wait_seconds: 30 }, { signal: ctrl.signal });
    setTimeout(() => ctrl.abort(why), 100);
    const began = Date.now();
    const late = new Promise((_, ko) => setTimeout(() => ko(new Error("still pending after 8 s")), 8_000).unref());
    await assert.rejects(Promise.race([claim, late]), (e: unknown) => e === why);
    assert.ok(Date.now() - began < 6_000);
  });
});
