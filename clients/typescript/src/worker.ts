// Worker: claims jobs and runs them with async handlers.

import type { Client, RequestOptions } from "./client.js";
import { BatchCompleter } from "./completions.js";
import {
  AccessDeniedError,
  ApiError,
  ConflictError,
  InvalidInputError,
  NotFoundError,
  SnoozeLimitError,
  TooLargeError,
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
import {
  checkOptions,
  defaultLogger,
  type Logger,
  type WorkerCounts,
  type WorkerOptions,
} from "./worker-options.js";
import { startHeartbeats, type Beat } from "./heartbeats.js";
import { callRetrying, describe, pauseFor, releaseAtShutdown, type CallResult } from "./retries.js";
import { TIMED_OUT } from "./send.js";
import { failSpec, failedOutcome, messageOf, stackOf } from "./failures.js";
import { loadOpenTelemetry, startJobSpan, type JobSpan, type OpenTelemetryApi } from "./tracing.js";
import type { ClaimedJob } from "./types.js";
import { VERSION } from "./version.js";

export type { Logger, WorkerCounts, WorkerOptions } from "./worker-options.js";

// The pause after an empty claim when claims do not wait.
const IDLE_POLL_MS = 1000;
// The longest pause between claims after failed ones.
const CLAIM_BACKOFF_MAX_MS = 5000;
// How long past the stop deadline the outcomes still being sent are waited
// for; then they are given up, and their jobs run again when their leases
// end.
const OUTCOME_GRACE_MS = 5000;

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
 * to `shutdownTimeoutMs` (a claim still in flight does not delay that),
 * then releases those still running, all at once: they are pending again
 * at once, the attempt not counted. Jobs whose claim was answered while it
 * stopped are released too, unrun. A release is tried for 5 s at most in
 * all; outcomes still being sent 5 s past the stop deadline are given up
 * (their jobs run again when their leases end). When `run()` resolves no
 * request or timer of the worker is left. A `stop()` before `run()` makes
 * it return at once.
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
  // Aborted (with TIMED_OUT) when the time for outcomes is up at shutdown.
  #cut = new AbortController();
  #givenUp = 0; // outcomes cut off at shutdown
  readonly #completer: BatchCompleter;

  constructor(client: Client, options: WorkerOptions) {
    const o = options;
    const v = checkOptions(o);
    this.#handlers = v.handlers;
    this.client = client;
    this.queues = v.queues;
    this.concurrency = v.concurrency;
    this.leaseMs = v.leaseMs;
    this.heartbeatMs = v.heartbeatMs;
    this.waitMs = v.waitMs;
    this.parentResults = o.parentResults === true;
    this.handlerTimeoutMs = o.handlerTimeoutMs;
    this.shutdownTimeoutMs = v.shutdownTimeoutMs;
    this.name = o.name ?? defaultName();
    this.#log = o.logger ?? defaultLogger;
    this.#otel = o.opentelemetry;
    this.#signal = o.signal;
    this.#completer = new BatchCompleter(
      client,
      () => this.#log.info(`worker ${this.name}: the server has no batch completion; completing jobs one by one`),
      () => this.#cut.signal,
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
    this.#cut = new AbortController();
    this.#givenUp = 0;
    const onAbort = (): void => {
      this.#log.info(`worker ${this.name}: stop signal received; stopping`);
      this.stop();
    };
    if (this.#signal?.aborted) onAbort();
    else this.#signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const otel = await loadOpenTelemetry(this.#otel);
      this.#log.info(`worker ${this.name}: waiting for jobs on ${this.queues.join(", ")}`);
      // The shutdown starts at the stop, a claim in flight or not.
      const claiming = this.#claimLoop(otel).catch((e: unknown) => {
        this.#log.error(`worker ${this.name}: claiming: ${describe(e)}`);
        this.#fatal ??= e;
        this.stop();
      });
      await this.#stopped();
      await this.#shutdown(claiming);
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
      let waitedMs = 0;
      try {
        const answer = await this.client.claimAnswer(
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
        jobs = answer.jobs;
        // Capped by the wait asked for and what the claim took: a server
        // cannot have held it longer. Not a number: none.
        const w = answer.waited_seconds;
        waitedMs = typeof w === "number" && Number.isFinite(w) ? Math.min(Math.max(w * 1000, 0), this.waitMs, Date.now() - started) : 0;
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
      // Never late: the server held the claim waitedMs (a long poll)
      // before the claim that took the jobs began, and got it after it
      // was sent.
      const leaseEnd = started + waitedMs + this.leaseMs;
      for (const job of jobs) {
        this.counts.claimed++;
        if (this.stopping) this.#track(this.#releaseUnstarted(job));
        else this.#track(this.#runJob(job, leaseEnd, otel));
      }
    }
  }

  #track(p: Promise<void>): void {
    this.#tasks.add(p);
    void p.finally(() => {
      this.#tasks.delete(p);
      this.#wake();
    });
  }

  async #releaseUnstarted(job: ClaimedJob): Promise<void> {
    this.#log.info(`worker ${this.name}: job ${job.id} claimed while stopping; releasing it`);
    await this.#release(job);
  }

  /** Releases job at shutdown (releaseAtShutdown), and counts it. */
  async #release(job: ClaimedJob): Promise<void> {
    const prefix = `worker ${this.name}: job ${job.id}: `;
    this.#count(await releaseAtShutdown(this.client, job, this.#log, prefix), true);
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
        beat: (ms, signal) => this.#beat(run, Math.min(ms, this.client.timeoutMs), signal),
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
   * client's) for the answer, and no longer once signal aborts. */
  async #beat(run: Run, timeoutMs: number | undefined, signal: AbortSignal): Promise<Beat> {
    const started = Date.now();
    try {
      await this.client.heartbeat(run.job.id, run.job.token, this.leaseMs / 1000, { timeoutMs, signal });
      run.leaseEnd = Math.max(run.leaseEnd, started + this.leaseMs);
      return { type: "ok" };
    } catch (e) {
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        return { type: "lost", reason: `the job's claim was lost: ${e.code}` };
      }
      if (signal.aborted) return { type: "failed", retryAfterMs: 0 };
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
        await this.#release(job);
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
        const ok = await this.#call(job, "snooze", (o) => this.client.snooze(job.id, job.token, value.seconds, o), run.leaseEnd, [
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
      // Fenced by the claim token: a claim lost meanwhile (the job rescued,
      // perhaps running under another worker) cancels nothing.
      if (await this.#call(job, "cancel", (o) => this.client.cancelJob(job.id, { ...o, token: job.token }), run.leaseEnd)) {
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
      const done = await this.#call(job, "complete", (o) => this.client.complete(job.id, job.token, value, o), run.leaseEnd, [
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
    const spec = failSpec(message, stack, discard);
    this.#log.info(
      `worker ${this.name}: job ${job.id} (${job.kind}) attempt ${job.attempt} failed${discard ? " for good" : ""}: ${spec.error}`,
    );
    if (await this.#call(job, "fail", (o) => this.client.fail(job.id, job.token, spec, o), run.leaseEnd)) {
      if (discard) this.counts.discarded++;
      else this.counts.failed++;
    }
  }

  /**
   * Calls fn, retrying what may pass (no connection, 429, 5xx) until the
   * lease ends; the shutdown cuts it OUTCOME_GRACE_MS past the stop
   * deadline. Resolves true when it was done, false when it was refused
   * (the claim is gone) or given up on; rejects with the errors of the
   * classes in `reraise`.
   */
  async #call(
    job: ClaimedJob,
    what: string,
    fn: (options: RequestOptions) => Promise<unknown>,
    leaseEnd: number,
    reraise: Array<abstract new (...args: never[]) => Error> = [],
  ): Promise<boolean> {
    const until = Math.max(leaseEnd, Date.now() + 1000);
    const prefix = `worker ${this.name}: job ${job.id}: `;
    const r = await callRetrying(fn, { what, until, bounded: false, cut: this.#cut.signal, reraise, log: this.#log, prefix });
    this.#count(r);
    return r === "done";
  }

  /** Counts a call's result that is no outcome of its own: a claim lost,
   * an outcome cut off, a job released. */
  #count(r: CallResult, release = false): void {
    if (r === "lost") this.counts.lost++;
    else if (r === "cut") this.#givenUp++;
    else if (r === "done" && release) this.counts.released++;
  }

  // ---- stopping --------------------------------------------------------

  /**
   * Waits for the running jobs until the stop deadline and releases those
   * still running; waits for the outcomes still being sent until
   * OUTCOME_GRACE_MS past the deadline, then cuts them off; and waits for
   * what ends by itself: the claim in flight (HALF_CLOSED_MS after the
   * stop at most) and the releases (RELEASE_WAIT_MS each at most).
   */
  async #shutdown(claiming: Promise<void>): Promise<void> {
    let claimed = false;
    void claiming.then(() => {
      claimed = true;
      this.#wake();
    });
    if (this.#runs.size > 0) this.#log.info(`worker ${this.name}: waiting for ${this.#runs.size} running job(s)`);
    await this.#until(() => this.#runs.size === 0, 0);
    for (const run of this.#runs.values()) run.decide({ type: "release" });
    await this.#until(() => claimed && this.#tasks.size === 0, OUTCOME_GRACE_MS);
    this.#cut.abort(TIMED_OUT);
    await claiming;
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    if (this.#givenUp > 0) {
      const late = `${OUTCOME_GRACE_MS} ms past the stop deadline`;
      const again = "their jobs run again when their leases end";
      this.#log.error(`worker ${this.name}: gave up ${this.#givenUp} outcome(s) still unsent ${late}; ${again}`);
    }
    this.#log.info(`worker ${this.name}: stopped`);
  }

  /** Waits until done() holds, or until extraMs past the stop deadline
   * (which a later stop() can bring forward). */
  async #until(done: () => boolean, extraMs: number): Promise<void> {
    while (!done()) {
      const left = (this.#stopDeadline ?? Date.now()) + extraMs - Date.now();
      if (left <= 0) return;
      let t: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([this.#changed(), new Promise<void>((r) => (t = setTimeout(r, left)))]);
      clearTimeout(t);
    }
  }

  /** Resolves once the worker is asked to stop. */
  #stopped(): Promise<void> {
    const stop = this.#stop.signal;
    if (stop.aborted) return Promise.resolve();
    return new Promise((resolve) => stop.addEventListener("abort", () => resolve(), { once: true }));
  }

  /** Resolves at the next change: a job or a task ended, the claims
   * ended, or stop() was called. */
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
    return pauseFor(ms, this.#stop.signal);
  }
}

function defaultName(): string {
  const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
  const rand = Math.random().toString(36).slice(2, 8);
  return pid === undefined ? `ts-${rand}` : `ts-${pid}-${rand}`;
}
