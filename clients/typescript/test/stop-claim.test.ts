// A worker stopped while the server answers its claim: the answer, jobs
// claimed an instant before the stop, is already on its way. The worker
// must still read it and release those jobs unrun; dropped, they would
// stay running for no one until their lease ran out, an attempt spent (a
// job of one attempt failed without ever running).

import assert from "node:assert/strict";
import { createServer, connect, type Socket } from "node:net";
import { after, describe, test } from "node:test";

import { Client, Worker } from "@readpast/client";

import { client, serverURL, token, unique, waitUntil } from "./support.js";

/** A TCP proxy in front of the server that passes the client's bytes on
 * at once (its half-close too) and, while holding, keeps the server's
 * bytes until release(). */
async function holdingProxy(target: string): Promise<{
  url: string;
  sent: () => number;
  held: () => number;
  hold(): void;
  release(): void;
}> {
  const to = new URL(target);
  let sent = 0;
  let holding = false;
  const held: { to: Socket; data: Buffer | null }[] = []; // null: the server's end
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true }, (c) => {
    const s = connect({ host: to.hostname, port: Number(to.port), allowHalfOpen: true });
    for (const x of [c, s]) {
      sockets.add(x);
      x.on("error", () => {});
      x.on("close", () => sockets.delete(x));
    }
    c.on("data", (b: Buffer) => {
      sent += b.length;
      s.write(b);
    });
    c.on("end", () => s.end()); // the client's half-close, passed on
    s.on("data", (b: Buffer) => {
      if (holding) held.push({ to: c, data: b });
      else c.write(b);
    });
    s.on("end", () => {
      if (holding) held.push({ to: c, data: null });
      else c.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  after(() => {
    for (const x of sockets) x.destroy();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    sent: () => sent,
    held: () => held.filter((h) => h.data !== null).length,
    hold: () => (holding = true),
    release: () => {
      holding = false;
      for (const h of held.splice(0)) {
        if (h.data === null) h.to.end();
        else h.to.write(h.data);
      }
    },
  };
}

describe("a worker stopped while its claim is answered", () => {
  test("reads the answer on its way and releases its jobs unrun", async () => {
    const direct = client();
    const proxy = await holdingProxy(serverURL);
    const via = new Client(proxy.url, { token });
    const queue = unique("stopclaim");
    const ran: number[] = [];
    const worker = new Worker(via, {
      queues: [queue],
      handlers: { k: (job) => void ran.push(job.id) },
      leaseMs: 60_000,
      waitMs: 20_000,
      shutdownTimeoutMs: 5_000,
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      opentelemetry: false,
    });
    const done = worker.run();
    // The worker's long poll is at the server.
    await waitUntil(() => proxy.sent() > 0, "the claim to be sent");
    proxy.hold();
    const job = await direct.enqueue({ kind: "k", queue, max_attempts: 1 });
    await waitUntil(async () => (await direct.getJob(job.id)).state === "running", "the server to claim the job");
    await waitUntil(() => proxy.held() > 0, "the answer with the job to be on its way");
    worker.stop();
    proxy.release();
    await done;
    const got = await waitUntil(
      async () => {
        const j = await direct.getJob(job.id);
        return j.state === "pending" ? j : null;
      },
      "the job to be released",
      10_000,
    );
    assert.equal(got.attempt, 0);
    assert.deepEqual(ran, [], "the job ran after the stop");
    assert.equal(worker.counts.released, 1);
  });
});

describe("a worker stopped while the server is silent", () => {
  test("gives its releases up within a few seconds, not at the lease's end", async () => {
    const direct = client();
    const proxy = await holdingProxy(serverURL);
    const via = new Client(proxy.url, { token });
    const queue = unique("silent");
    const worker = new Worker(via, {
      queues: [queue],
      handlers: { k: (_job, ctx) => new Promise((r) => ctx.signal.addEventListener("abort", r)) },
      leaseMs: 60_000,
      waitMs: 20_000,
      shutdownTimeoutMs: 0,
      logger: { info: () => {}, warn: () => {}, error: () => {} },
      opentelemetry: false,
    });
    const done = worker.run();
    const job = await direct.enqueue({ kind: "k", queue });
    await waitUntil(async () => (await direct.getJob(job.id)).state === "running", "the job to run");
    proxy.hold(); // nothing the server sends reaches the worker
    const began = Date.now();
    worker.stop();
    const late = new Promise((_, ko) => setTimeout(() => ko(new Error("run() still pending after 20 s")), 20_000).unref());
    await Promise.race([done, late]);
    assert.ok(Date.now() - began < 15_000, `run() took ${Date.now() - began} ms`);
    assert.equal(worker.counts.released, 0);
    proxy.release();
  });
});
