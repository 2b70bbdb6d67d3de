// The worker's batched completions: results of jobs that finish while a
// batch is being written go together in the next one
// (`POST /v1/jobs/complete`).

import type { Client } from "./client.js";
import { MethodNotAllowedError, NotFoundError } from "./errors.js";

/** The most completions one batch carries (the server's default batch
 * limit is 1000). */
const MAX_COMPLETE_BATCH = 500;

/** What became of a completion sent in a batch: written, refused (the
 * claim is gone), or to be sent alone. */
export type Batched = "done" | "lost" | "alone";

interface PendingCompletion {
  id: number;
  token: string;
  value: unknown;
  settle: (b: Batched) => void;
}

/**
 * Sends a worker's completions in batches: one batch at a time, each with
 * every completion that arrived while the one before was being written.
 * A batch that fails as a whole, or a server without the batch route,
 * leaves the completions to be sent alone (with the retries of a single
 * completion); once the server showed it has no batch route, every later
 * one goes alone at once. A batch's request ends when the signal of the
 * moment (the worker's, which its shutdown aborts once the time for
 * outcomes is up) aborts.
 */
export class BatchCompleter {
  readonly #client: Client;
  readonly #noRoute: () => void;
  readonly #signal: () => AbortSignal;
  #pending: PendingCompletion[] = [];
  #sending = false;
  #noBatchRoute = false;

  /** `noRoute` is called once, when the server turns out to have no batch
   * route; `signal` gives the signal each batch's request is sent with. */
  constructor(client: Client, noRoute: () => void, signal: () => AbortSignal) {
    this.#client = client;
    this.#noRoute = noRoute;
    this.#signal = signal;
  }

  /** Resolves once the job's completion was written ("done") or refused
   * ("lost"), or with "alone" when it must be sent by itself. */
  complete(id: number, token: string, value: unknown): Promise<Batched> {
    if (this.#noBatchRoute) return Promise.resolve("alone");
    return new Promise((settle) => {
      this.#pending.push({ id, token, value, settle });
      if (!this.#sending) void this.#send();
    });
  }

  async #send(): Promise<void> {
    this.#sending = true;
    try {
      while (this.#pending.length > 0) {
        if (this.#noBatchRoute) {
          for (const p of this.#pending.splice(0)) p.settle("alone");
          break;
        }
        const batch = this.#pending.splice(0, MAX_COMPLETE_BATCH);
        try {
          const results = await this.#client.completeMany(
            batch.map((p) => ({ id: p.id, token: p.token, result: p.value })),
            { signal: this.#signal() },
          );
          batch.forEach((p, i) => {
            const r = results[i];
            if (r?.ok === true && r.id === p.id) p.settle("done");
            else if (r?.error?.code === "stale_token" || r?.error?.code === "not_found") p.settle("lost");
            else p.settle("alone");
          });
        } catch (e) {
          if (e instanceof NotFoundError || e instanceof MethodNotAllowedError) {
            this.#noBatchRoute = true;
            this.#noRoute();
          }
          for (const p of batch) p.settle("alone");
        }
      }
    } finally {
      this.#sending = false;
    }
  }
}
