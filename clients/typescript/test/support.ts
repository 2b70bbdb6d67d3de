// Helpers of the tests: the server they run against (READPAST_URL and
// READPAST_TOKEN, set by `go test ./clients/typescript`), unique names, and
// waiting for a condition with a deadline.

import { randomUUID } from "node:crypto";

import { Client, type ClientOptions, type Job } from "@readpast/client";

function env(name: string): string {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: run \`go test ./clients/typescript\`, which starts a server for these tests`);
  }
  return v;
}

export const serverURL = env("READPAST_URL");
export const token = env("READPAST_TOKEN");
/** A read-only token of the same server. */
export const readToken = env("READPAST_READ_TOKEN");

/** A client of the test server with the full token. */
export function client(options: ClientOptions = {}): Client {
  return new Client(serverURL, { token, ...options });
}

/** A name no other test uses (queues, kinds, schedules, keys). */
export function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 10)}`;
}

/** Calls check until it resolves with something truthy, and returns it;
 * throws naming what after timeoutMs. */
export async function waitUntil<T>(check: () => Promise<T> | T, what: string, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await check();
    if (last) return last as NonNullable<T>;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
    }
    await sleep(25);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A sleep that does not keep the process alive: for the timeout side of
 * a race. */
export function deadline(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

/** Waits until the job is succeeded, failed or cancelled. */
export function finished(c: Client, id: number, timeoutMs = 15_000): Promise<Job> {
  return waitUntil(async () => {
    const j = await c.getJob(id);
    return ["succeeded", "failed", "cancelled"].includes(j.state) ? j : undefined;
  }, `job ${id} to finish`, timeoutMs);
}
