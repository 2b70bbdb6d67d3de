// Worker: claims jobs and runs them with async handlers.

import type { Client } from "./client.js";
import { BatchCompleter } from "./completions.js";
import {
  AccessDeniedError,
  ApiError,
  ConflictError,
  InvalidInputError,
  NetworkError,
  NotFoundError,
  ReadpastError,
  SnoozeLimitError,
  TooLargeError,
  TooManyAttemptsError,
  UnauthorizedError,
} from "./errors.js";
import {
  Cancel,
  Discard,
  HandlerTimeoutError,
  JobLostError,
  Snooze,
  WorkerStoppedError,
  type Handler,
  type JobContext,
} from "./handler.js";
import { defaultLogger, type Logger, type WorkerCounts, type WorkerOptions } from "./worker-options.js";
import { startHeartbeats, type Beat } from "./heartbeats.js";
import { loadOpenTelemetry, startJobSpan, type JobOutcome, type JobSpan, type OpenTelemetryApi } from "./tracing.js";
import type { ClaimedJob } from "./types.js";
import { VERSION } from "./version.js";

/** The outcome of a failed attempt: retrying while attempts remain. */
function failedOutcome(job: ClaimedJob): JobOutcome {
  return job.attempt < job.max_attempts ? "retrying" : "failed";
}

export type { Logger, WorkerCounts, WorkerOptions } from "./worker-options.js";

// The most of an error message and of a stack a failure sends.
const MAX_MESSAGE = 8 * 1024;
const MAX_STACK = 64 * 1024;
// The pause after an empty claim when claims do not wait.
const IDLE_POLL_MS = 1000;
// The longest pause between claims after failed ones.
const CLAIM_BACKOFF_MAX_MS = 5000;
// How long a release at shutdown is tried; then its lease ends it.
const RELEASE_WAIT_MS = 5000;

type Outcome =
  | { type: "returned"; value: unknown }
  | { type: "threw"; error: unknown }
  | { type: "timeout"; ms: number }
  | { type: "lost"; reason: string }
  | { type: "release" };

/** One job in this worker. */
interface Run {
  job: ClaimedJob;
  ctrl: AbortController;
  leaseEnd: number; // Date.now() when the lease ends
  decide: (o: Outcome) => void;
}

/**
 * Runs jobs of `queues` with `handlers`, up to `concurrency` at once, each
 * as an async task.
 *
 * It long-polls claims for as many jobs as it has free slots, heartbeats
 * each running job every third of its lease (each heartbeat waits at most
 * that long for its answer; one that got none is sent again at once), and
 * records the outcome: a handler's value completes the job with it as the
 * result; a Snooze, Cancel or Discard (returned or thrown) snoozes,
 * cancels or fails it for good; any other error fails the attempt with its stack, and the server
 * retries it with backoff. Past `handlerTimeoutMs` the job's signal is
 * aborted and the attempt fails. A claim that is lost (the job was
 * cancelled, or its lease expired) aborts the signal and drops the
 * outcome. Calls that may pass (no connection, 429, 5xx) are retried until
 * the job's lease ends.
 *
 * `run()` resolves once the worker stopped: when `signal` aborts or
 * `stop()` is called, it claims no more, lets running jobs finish for up
 * to `shutdownTimeoutMs`, then releases those still running: they are
 * pending again at once, the attempt not counted. Jobs whose claim was
 * answered while it stopped are released too, unrun. A `stop()` before
 * `run()` makes it return at once.
 */
export class Worker {
  readonly client: Client;
  readonly name: string;
  readonly queues: string[];
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  readonly waitMs: number;
  readonly parentResults: boolean;
  readonly handlerTimeoutMs: number | undefined;
  readonly shutdownTimeoutMs: number;
  readonly counts: WorkerCounts = {
    claimed: 0,
    succeeded: 0,
    failed: 0,
    snoozed: 0,
    cancelled: 0,
    discarded: 0,
    released: 0,
    timedOut: 0,
    lost: 0,
  };

  readonly #handlers: Map<string, Handler>;
  readonly #log: Logger;
  readonly #otel: OpenTelemetryApi | false | undefined;
  readonly #signal: AbortSignal | undefined;
  // One entry per claim, not per job id: a job claimed again while its old
  // run still sends its outcome takes a second slot.
  readonly #runs = new Set<Run>();
  readonly #tasks = new Set<Promise<void>>();
  #stop = new AbortController(); // aborted by stop()
  #stopDeadline: number | undefined;
  #ran = false; // a run() ended: the next one starts unstopped
  #wakers: Array<() => void> = [];
  #running = false;
  #fatal: unknown;
  readonly #completer: BatchCompleter;

  constructor(client: Client, options: WorkerOptions) {
    const o = options;
    const queues = o.queues ?? ["default"];
    if (!Array.isArray(queues) || queues.length === 0) {
      throw new TypeError("queues must be an array of at least one queue name");
    }
    const concurrency = o.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError("concurrency must be an integer of at least 1");
    }
    const leaseMs = o.leaseMs ?? 30_000;
    if (!(leaseMs > 0)) throw new RangeError("leaseMs must be positive");
    const heartbeatMs = o.heartbeatMs ?? leaseMs / 3;
    if (!(heartbeatMs > 0 && heartbeatMs < leaseMs)) {
      throw new RangeError("heartbeatMs must be positive and shorter than leaseMs");
    }
    const waitMs = o.waitMs ?? 20_000;
    if (!(waitMs >= 0 && waitMs <= 300_000)) throw new RangeError("waitMs must be between 0 and 300000");
    if (o.handlerTimeoutMs !== undefined && !(o.handlerTimeoutMs > 0)) {
      throw new RangeError("handlerTimeoutMs must be positive");
    }
    const shutdownTimeoutMs = o.shutdownTimeoutMs ?? 30_000;
    if (!(shutdownTimeoutMs >= 0)) throw new RangeError("shutdownTimeoutMs must not be negative");
    this.#handlers = new Map();
    for (const [kind, fn] of Object.entries(o.handlers ?? {})) {
      if (typeof fn !== "function") throw new TypeError(`the handler of ${JSON.stringify(kind)} is not a function`);
      this.#handlers.set(kind, fn);
    }
    this.client = client;
    this.queues = [...queues];
    this.concurrency = concurrency;
    this.leaseMs = leaseMs;
    this.heartbeatMs = heartbeatMs;
    this.waitMs = waitMs;
    this.parentResults = o.parentResults === true;
    this.handlerTimeoutMs = o.handlerTimeoutMs;
    this.shutdownTimeoutMs = shutdownTimeoutMs;
    this.name = o.name ?? defaultName();
    this.#log = o.logger ?? defaultLogger;
    this.#otel = o.opentelemetry;
    this.#signal = o.signal;
    this.#completer = new BatchCompleter(client, () =>
      this.#log.info(`worker ${this.name}: the server has no batch completion; completing jobs one by one`),
    );
  }

  /** Whether the worker was asked to stop. */
  get stopping(): boolean {
    return this.#stop.signal.aborted;
  }

  /** The ids of the jobs the worker holds now. */
  runningJobs(): number[] {
    return [...new Set([...this.#runs].map((r) => r.job.id))].sort((a, b) => a - b);
  }

  /**
   * Asks the worker to stop: no more claims; running jobs get `timeoutMs`
   * (default `shutdownTimeoutMs`) to finish before they are released.
   * Returns at once; calling it again can only shorten the wait. Made
   * before `run()`, it makes that run return at once.
   */
  stop(options: { timeoutMs?: number } = {}): void {
    if (!this.#running && this.#ran) this.#reset();
    const deadline = Date.now() + Math.max(0, options.timeoutMs ?? this.shutdownTimeoutMs);
    if (this.#stopDeadline === undefined || deadline < this.#stopDeadline) this.#stopDeadline = deadline;
    this.#stop.abort();
    this.#wake();
  }

  /** Claims and runs jobs until stopped, then shuts down gracefully.
   * Rejects with the claim's error when the server refuses it for good
   * (a bad queue name, a token that is not valid). */
  async run(): Promise<void> {
    if (this.#running) throw new Error("this worker is running already");
    this.#running = true;
    if (this.#ran) this.#reset();
    this.#fatal = undefined;
    const onAbort = (): void => {
      this.#log.info(`worker ${this.name}: stop signal received; stopping`);
      this.stop();
    };
    if (this.#signal?.aborted) onAbort();
    else this.#signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const otel = await loadOpenTelemetry(this.#otel);
      this.#log.info(`worker ${this.name}: waiting for jobs on ${this.queues.join(", ")}`);
      await this.#claimLoop(otel);
      await this.#shutdown();
    } finally {
      this.#signal?.removeEventListener("abort", onAbort);
      this.#running = false;
      this.#ran = true;
    }
    if (this.#fatal !== undefined) throw this.#fatal;
  }

  /** Makes the worker unstopped again, for another run. */
  #reset(): void {
    this.#stop = new AbortController();
    this.#stopDeadline = undefined;
    this.#ran = false;
  }

  // ---- claiming --------------------------------------------------------

  async #claimLoop(otel: OpenTelemetryApi | null): Promise<void> {
    let backoff = 0;
    while (!this.stopping) {
      while (this.#runs.size >= this.concurrency && !this.stopping) await this.#changed();
      if (this.stopping) break;
      const free = this.concurrency - this.#runs.size;
      const started = Date.now();
      let jobs: ClaimedJob[];
      try {
        jobs = await this.client.claim(
          {
            worker: this.name,
            queues: this.queues,
            limit: free,
            lease_seconds: this.leaseMs / 1000,
            wait_seconds: this.waitMs / 1000,
            parent_results: this.parentResults || undefined,
          },
          { signal: this.#stop.signal },
        );
        backoff = 0;
      } catch (e) {
        if (this.stopping) break;
        if (
          e instanceof InvalidInputError ||
          e instanceof UnauthorizedError ||
          e instanceof AccessDeniedError ||
          e instanceof NotFoundError
        ) {
          this.#log.error(`worker ${this.name}: claim refused: ${describe(e)}`);
          this.#fatal = e;
          this.stop();
          break;
        }
        backoff = Math.min(Math.max(backoff * 2, 100), CLAIM_BACKOFF_MAX_MS);
        let pause = backoff / 2 + (Math.random() * backoff) / 2;
        if (e instanceof ApiError && e.retryAfter) pause = Math.max(pause, e.retryAfter * 1000);
        this.#log.warn(`worker ${this.name}: claim: ${describe(e)}; trying again in ${Math.round(pause)} ms`);
        await this.#sleep(pause);
        continue;
      }
      if (jobs.length === 0 && this.waitMs === 0) await this.#sleep(IDLE_POLL_MS);
      const leaseEnd = started + this.leaseMs;
      for (const job of jobs) {
        this.counts.claimed++;
        if (this.stopping) this.#track(this.#releaseUnstarted(job, leaseEnd));
        else this.#track(this.#runJob(job, leaseEnd, otel));
      }
    }
  }

  #track(p: Promise<void>): void {
    this.#tasks.add(p);
    void p.finally(() => this.#tasks.delete(p));
  }

  async #releaseUnstarted(job: ClaimedJob, leaseEnd: number): Promise<void> {
    this.#log.info(`worker ${this.name}: job ${job.id} claimed while stopping; releasing it`);
    if (await this.#release(job, leaseEnd)) {
      this.counts.released++;
    }
  }

  /** Releases job at shutdown, for RELEASE_WAIT_MS at most; resolves
   * whether it was released. */
  #release(job: ClaimedJob, leaseEnd: number): Promise<boolean> {
    const until = Math.min(leaseEnd, Date.now() + RELEASE_WAIT_MS);
    return this.#call(job, "release", () => this.client.release(job.id, job.token, { timeoutMs: RELEASE_WAIT_MS }), until);
  }

  // ---- one job ---------------------------------------------------------

  async #runJob(job: ClaimedJob, leaseEnd: number, otel: OpenTelemetryApi | null): Promise<void> {
    const ctrl = new AbortController();
    let decide!: (o: Outcome) => void;
    const decided = new Promise<Outcome>((resolve) => {
      let done = false;
      decide = (o) => {
        if (!done) {
          done = true;
          resolve(o);
        }
      };
    });
    const run: Run = { job, ctrl, leaseEnd, decide };
    this.#runs.add(run);
    let span: JobSpan | undefined;
    let stopBeats = (): void => {};
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      const handler = this.#handlers.get(job.kind);
      if (handler === undefined) {
        await this.#fail(run, `no handler registered for kind ${JSON.stringify(job.kind)}`, "");
        return;
      }
      if (otel) {
        try {
          span = startJobSpan(otel, job, VERSION, this.name);
        } catch (e) {
          this.#log.warn(`worker ${this.name}: job ${job.id}: tracing: ${describe(e)}`);
        }
      }
      const ctx: JobContext = { signal: ctrl.signal, worker: this.name };
      const call = (): unknown => handler(job, ctx);
      Promise.resolve()
        .then(() => (span ? span.run(call) : call()))
        .then(
          (value) => decide({ type: "returned", value }),
          (error: unknown) => decide({ type: "threw", error }),
        );
      const timeoutMs = this.handlerTimeoutMs;
      if (timeoutMs !== undefined) timer = setTimeout(() => decide({ type: "timeout", ms: timeoutMs }), timeoutMs);
      stopBeats = startHeartbeats({
        intervalMs: this.heartbeatMs,
        beat: (ms) => this.#beat(run, Math.min(ms, this.client.timeoutMs)),
        leaseEnd: () => run.leaseEnd,
        lost: (reason) => decide({ type: "lost", reason }),
      });
      const outcome = await decided;
      stopBeats();
      clearTimeout(timer);
      timer = undefined;
      await this.#record(run, outcome, span);
    } catch (e) {
      // A bug here must not lose the slot.
      this.#log.error(`worker ${this.name}: job ${job.id}: ${describe(e)}`);
    } finally {
      stopBeats();
      clearTimeout(timer);
      span?.end();
      this.#runs.delete(run);
      this.#wake();
    }
  }

  /** Extends the lease, waiting at most timeoutMs (by default the
   * client's) for the answer. */
  async #beat(run: Run, timeoutMs?: number): Promise<Beat> {
    const started = Date.now();
    try {
      await this.client.heartbeat(run.job.id, run.job.token, this.leaseMs / 1000, { timeoutMs });
      run.leaseEnd = Math.max(run.leaseEnd, started + this.leaseMs);
      return { type: "ok" };
    } catch (e) {
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        return { type: "lost", reason: `the job's claim was lost: ${e.code}` };
      }
      this.#log.warn(`worker ${this.name}: job ${run.job.id}: heartbeat: ${describe(e)}`);
      const retryAfterMs = e instanceof ApiError && e.retryAfter ? e.retryAfter * 1000 : 0;
      return { type: "failed", retryAfterMs };
    }
  }

  async #record(run: Run, outcome: Outcome, span: JobSpan | undefined): Promise<void> {
    const job = run.job;
    switch (outcome.type) {
      case "lost":
        run.ctrl.abort(new JobLostError(outcome.reason));
        span?.end("lease_lost");
        this.counts.lost++;
        this.#log.warn(`worker ${this.name}: job ${job.id}: ${outcome.reason}; its outcome is dropped`);
        return;
      case "release":
        run.ctrl.abort(new WorkerStoppedError());
        span?.end("released", new WorkerStoppedError());
        this.#log.warn(`worker ${this.name}: job ${job.id} still running at the shutdown deadline; releasing it`);
        if (await this.#release(job, run.leaseEnd)) {
          this.counts.released++;
        }
        return;
      case "timeout": {
        const err = new HandlerTimeoutError(outcome.ms);
        run.ctrl.abort(err);
        span?.end(failedOutcome(job), err);
        this.counts.timedOut++;
        this.#log.warn(`worker ${this.name}: job ${job.id}: ${err.message}`);
        await this.#fail(run, err.message, "");
        return;
      }
    }
    const value = outcome.type === "threw" ? outcome.error : outcome.value;
    if (value instanceof Snooze) {
      span?.end("snoozed");
      try {
        const ok = await this.#call(job, "snooze", () => this.client.snooze(job.id, job.token, value.seconds), run.leaseEnd, [
          SnoozeLimitError,
          InvalidInputError,
        ]);
        if (ok) this.counts.snoozed++;
      } catch (e) {
        await this.#fail(run, `could not snooze: ${describe(e)}`, stackOf(value));
      }
      return;
    }
    if (value instanceof Cancel) {
      span?.end("cancelled");
      // Cancel takes no token: check first that the claim is still ours.
      if ((await this.#beat(run)).type === "lost") {
        this.counts.lost++;
        return;
      }
      if (await this.#call(job, "cancel", () => this.client.cancelJob(job.id), run.leaseEnd)) {
        this.counts.cancelled++;
        this.#log.info(`worker ${this.name}: job ${job.id} cancelled by its handler: ${value.message}`);
      }
      return;
    }
    if (value instanceof Discard) {
      span?.end("discarded", value);
      await this.#fail(run, value.message, stackOf(value), true);
      return;
    }
    if (outcome.type === "threw") {
      span?.end(failedOutcome(job), value);
      await this.#fail(run, messageOf(value), stackOf(value));
      return;
    }
    span?.end("succeeded");
    // Completed in a batch; the job holds its slot until it is written.
    const batched = await this.#completer.complete(job.id, job.token, value);
    if (batched === "done") {
      this.counts.succeeded++;
      return;
    }
    if (batched === "lost") {
      this.counts.lost++;
      this.#log.warn(`worker ${this.name}: job ${job.id}: complete refused: the job is no longer ours`);
      return;
    }
    try {
      const done = await this.#call(job, "complete", () => this.client.complete(job.id, job.token, value), run.leaseEnd, [
        InvalidInputError,
        TooLargeError,
        TypeError,
      ]);
      if (done) this.counts.succeeded++;
    } catch (e) {
      const why = e instanceof TypeError ? "the handler's result is not JSON" : "the server refused the handler's result";
      await this.#fail(run, `${why}: ${describe(e)}`, "");
    }
  }

  async #fail(run: Run, message: string, stack: string, discard = false): Promise<void> {
    const job = run.job;
    message = message.slice(0, MAX_MESSAGE) || "failed";
    if (stack.length > MAX_STACK) stack = stack.slice(0, MAX_STACK / 2) + "\n…\n" + stack.slice(-MAX_STACK / 2);
    this.#log.info(
      `worker ${this.name}: job ${job.id} (${job.kind}) attempt ${job.attempt} failed${discard ? " for good" : ""}: ${message}`,
    );
    const spec = { error: message, ...(stack ? { stack } : {}), ...(discard ? { discard: true } : {}) };
    if (await this.#call(job, "fail", () => this.client.fail(job.id, job.token, spec), run.leaseEnd)) {
      if (discard) this.counts.discarded++;
      else this.counts.failed++;
    }
  }

  /**
   * Calls fn, retrying what may pass (no connection, 429, 5xx) until the
   * lease ends. Resolves true when it was done, false when it was refused
   * (the claim is gone) or given up on; rejects with the errors of the
   * classes in `reraise`.
   */
  async #call(
    job: ClaimedJob,
    what: string,
    fn: () => Promise<unknown>,
    leaseEnd: number,
    reraise: Array<abstract new (...args: never[]) => Error> = [],
  ): Promise<boolean> {
    const deadline = Math.max(leaseEnd, Date.now() + 1000);
    let backoff = 100;
    for (;;) {
      try {
        await fn();
        return true;
      } catch (e) {
        if (reraise.some((c) => e instanceof c)) throw e;
        if (e instanceof ConflictError || e instanceof NotFoundError) {
          this.counts.lost++;
          this.#log.warn(`worker ${this.name}: job ${job.id}: ${what} refused (${e.code}): the job is no longer ours`);
          return false;
        }
        const passing =
          e instanceof NetworkError || (e instanceof ApiError && (e.status >= 500 || e instanceof TooManyAttemptsError));
        let pause = backoff;
        if (e instanceof ApiError && e.retryAfter) pause = Math.max(pause, e.retryAfter * 1000);
        if (!passing || Date.now() + pause > deadline) {
          this.#log.error(
            `worker ${this.name}: job ${job.id}: ${what}: ${describe(e)} (given up: the lease will expire and the job run again)`,
          );
          return false;
        }
        this.#log.warn(`worker ${this.name}: job ${job.id}: ${what}: ${describe(e)}; trying again`);
        await new Promise((r) => setTimeout(r, pause));
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }

  // ---- stopping --------------------------------------------------------

  /** Waits for the running jobs until the stop deadline, releases those
   * still running, and waits until every outcome is recorded. */
  async #shutdown(): Promise<void> {
    if (this.#runs.size > 0) this.#log.info(`worker ${this.name}: waiting for ${this.#runs.size} running job(s)`);
    while (this.#runs.size > 0) {
      const left = (this.#stopDeadline ?? Date.now()) - Date.now();
      if (left <= 0) break;
      let t: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([this.#changed(), new Promise<void>((r) => (t = setTimeout(r, left)))]);
      clearTimeout(t);
    }
    for (const run of this.#runs.values()) run.decide({ type: "release" });
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    this.#log.info(`worker ${this.name}: stopped`);
  }

  /** Resolves at the next change: a job ended, or stop() was called. */
  #changed(): Promise<void> {
    return new Promise((resolve) => this.#wakers.push(resolve));
  }

  #wake(): void {
    const w = this.#wakers;
    this.#wakers = [];
    for (const f of w) f();
  }

  /** Sleeps ms, or less when the worker stops. */
  #sleep(ms: number): Promise<void> {
    const stop = this.#stop.signal;
    if (stop.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(t);
        stop.removeEventListener("abort", done);
        resolve();
      };
      const t = setTimeout(done, ms);
      stop.addEventListener("abort", done, { once: true });
    });
  }
}

function defaultName(): string {
  const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
  const rand = Math.random().toString(36).slice(2, 8);
  return pid === undefined ? `ts-${rand}` : `ts-${pid}-${rand}`;
}

function describe(e: unknown): string {
  if (e instanceof ReadpastError || e instanceof Error) return e.message;
  return String(e);
}

function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message ? `${e.name}: ${e.message}` : e.name;
  try {
    return `thrown: ${typeof e === "string" ? e : JSON.stringify(e)}`;
  } catch {
    return `thrown: ${String(e)}`;
  }
}

function stackOf(e: unknown): string {
  return e instanceof Error && typeof e.stack === "string" ? e.stack : "";
}
