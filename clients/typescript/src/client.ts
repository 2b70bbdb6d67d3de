// Client: one method per operation of the readpast HTTP API (/v1).

import {
  batchPath,
  checkLimit,
  compact,
  enqueueBody,
  enqueueHeaders,
  flowJobBody,
  jobPath,
  limitPath,
  openBatchBody,
  schedulePath,
  segment,
  timeOf,
} from "./encode.js";
import { ApiError, NetworkError } from "./errors.js";
import { fetchSend, nodeSend, onNode, type Send } from "./send.js";
import { bearer, checkBaseURL, request, type Call, type Transport } from "./transport.js";
import type {
  Batch,
  BatchBody,
  BatchJobSpec,
  BatchJobsBody,
  BulkBody,
  BulkFilter,
  BulkResult,
  ClaimBody,
  ClaimResponse,
  ClaimSpec,
  ClaimedJob,
  CompleteBatchBody,
  CompleteBatchResponse,
  CompleteBody,
  CompletionResult,
  CompletionSpec,
  FailBody,
  FailSpec,
  FlowBody,
  FlowGraph,
  FlowGraphQuery,
  FlowJobSpec,
  HealthStatus,
  HeartbeatBody,
  HeartbeatResult,
  IdempotencyKey,
  Job,
  JobSpec,
  JobSummary,
  JobsResponse,
  Limit,
  LimitBody,
  LimitInfo,
  LimitSpec,
  LimitsResponse,
  ListQuery,
  ListResponse,
  OpenBatchSpec,
  Queue,
  QueuesResponse,
  Relatives,
  RelativesQuery,
  ReleaseBody,
  CancelBody,
  Schedule,
  ScheduleBody,
  ScheduleSpec,
  SchedulesResponse,
  ServerInfo,
  SnoozeBody,
  Stats,
  TakeTokensBody,
  TokenGrant,
  TraceContext,
} from "./types.js";

/** Milliseconds each request may take by default (a claim adds its wait). */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** How a Client is made. */
export interface ClientOptions {
  /** The bearer token (a read token will do for the methods that only read). */
  token?: string | undefined;
  /** The fetch to send requests with. By default, on Node, requests go
   * through node:http on connections the process's clients share and keep
   * alive (a worker spends about 40% less CPU per job than through fetch;
   * undici's global dispatcher, a proxy say, is not used: pass
   * `globalThis.fetch` for it); elsewhere (Deno, Bun, browsers) through
   * the global fetch. */
  fetch?: typeof globalThis.fetch | undefined;
  /** Bound on each request in milliseconds (a claim adds its long-poll wait). */
  timeoutMs?: number | undefined;
  /** Headers added to every request. */
  headers?: Record<string, string> | undefined;
}

/** Options of any one call. */
export interface RequestOptions {
  /** Aborts the request; the call then rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number | undefined;
}

/** Options of an enqueue: headers of the request besides the job. */
export interface EnqueueOptions extends RequestOptions, TraceContext {
  /** The `Idempotency-Key` header: the same request sent again within the
   * server's idempotency period returns the job the first one made, with
   * `duplicate: true`. Cannot be combined with `unique_key`. */
  idempotencyKey?: IdempotencyKey;
}

/** A page of jobs: full jobs, or summaries with `summary: true`. */
export type JobPage<J extends Job | JobSummary = Job> = Omit<ListResponse, "jobs"> & { jobs: J[] };

/**
 * A client of one readpast server's HTTP API.
 *
 * Every method sends one request (the iterators one per page) and resolves
 * with what the server answered, or rejects: with the ApiError subclass of
 * the answer's error code (StaleClaimError, NotFoundError, ...), with a
 * NetworkError when no answer came (RequestTimeoutError past `timeoutMs`),
 * or with the signal's reason when the caller aborted. Nothing is retried
 * here; the Worker retries what is safe to. It uses only `fetch`, so it
 * runs in Node 18 and later, Deno, Bun and browsers.
 */
export class Client {
  /** The server's base URL, without a trailing slash. */
  readonly url: string;
  readonly timeoutMs: number;
  readonly #transport: Transport;

  constructor(url: string, options: ClientOptions = {}) {
    checkBaseURL(url);
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
      throw new RangeError("timeoutMs must be a positive number");
    }
    // On Node, node:http unless a fetch was given; elsewhere, fetch.
    let send: Send;
    if (options.fetch === undefined && onNode()) {
      send = nodeSend();
    } else {
      const f = options.fetch ?? globalThis.fetch;
      if (typeof f !== "function") {
        throw new TypeError("no fetch: pass options.fetch, or use Node 18 or later");
      }
      send = fetchSend(f);
    }
    this.url = url.replace(/\/+$/, "");
    this.timeoutMs = timeoutMs;
    this.#transport = {
      url: this.url,
      timeoutMs,
      token: bearer(options.token),
      send,
      headers: { ...options.headers },
    };
  }

  // ---- transport -------------------------------------------------------

  #request<T>(method: string, path: string, call: Call = {}): Promise<T> {
    return request<T>(this.#transport, method, path, call);
  }

  // ---- server ----------------------------------------------------------

  /** `GET /v1`: which server this is. */
  async info(opts?: RequestOptions): Promise<ServerInfo> {
    return this.#request("GET", "/v1", { ...opts });
  }

  /** `GET /healthz`: whether the server process answers. */
  async healthy(opts?: RequestOptions): Promise<boolean> {
    try {
      const s = await this.#request<HealthStatus>("GET", "/healthz", { ...opts });
      return s.status === "ok";
    } catch (e) {
      if (e instanceof NetworkError) return false;
      throw e;
    }
  }

  /** `GET /readyz`: whether the server's database answers (false on 503 or
   * no answer). */
  async ready(opts?: RequestOptions): Promise<boolean> {
    try {
      const s = await this.#request<HealthStatus>("GET", "/readyz", { ...opts });
      return s.status === "ready";
    } catch (e) {
      if (e instanceof NetworkError || (e instanceof ApiError && e.status === 503)) return false;
      throw e;
    }
  }

  /** `GET /v1/openapi.json`: the API's OpenAPI 3.1 document. */
  async openapi(opts?: RequestOptions): Promise<Record<string, unknown>> {
    return this.#request("GET", "/v1/openapi.json", { ...opts });
  }

  // ---- enqueue ---------------------------------------------------------

  /**
   * `POST /v1/jobs`: enqueues one job and resolves with it. With a
   * `unique_key` or an `idempotencyKey` that a job holds, nothing is
   * created and the answer is that job, with `duplicate: true`.
   * `traceparent` and `tracestate` are sent as the W3C trace context
   * headers of the request.
   */
  async enqueue(job: JobSpec, opts: EnqueueOptions = {}): Promise<Job> {
    return this.#request("POST", "/v1/jobs", {
      ...opts,
      body: enqueueBody(job, "job"),
      headers: enqueueHeaders(opts),
    });
  }

  /** `POST /v1/jobs/batch`: enqueues jobs atomically (all or none) and
   * resolves with them in order (duplicates marked). An error names the
   * entry (`field` `jobs[3].kind`). */
  async enqueueMany(jobs: readonly JobSpec[], opts: Omit<EnqueueOptions, "idempotencyKey"> = {}): Promise<Job[]> {
    if (!Array.isArray(jobs) || jobs.length === 0) {
      throw new TypeError("enqueueMany needs a non-empty array of jobs");
    }
    const body: BatchBody = { jobs: jobs.map((j, i) => enqueueBody(j, `jobs[${i}]`)) };
    const res = await this.#request<JobsResponse>("POST", "/v1/jobs/batch", {
      ...opts,
      body,
      headers: enqueueHeaders(opts),
    });
    return res.jobs;
  }

  /**
   * `POST /v1/flows`: enqueues a flow, jobs that run after other jobs,
   * atomically (all or none), and resolves with them in order: those with
   * edges `blocked`, the others `pending`.
   *
   * ```ts
   * const [extract, render] = await client.enqueueFlow([
   *   { ref: "extract", kind: "extract", payload: { file: "a.csv" } },
   *   { kind: "render", after: [{ ref: "extract" }, { job_id: 42, policy: "hold_child" }] },
   * ]);
   * ```
   *
   * A blocked job becomes pending once every job it runs after has
   * succeeded; when one ends without succeeding, the edge's `policy`
   * applies. An error names the entry (`field` `jobs[1].after[0].ref`); a
   * `job_id` no job has is a `not_found` error, one whose job has
   * finished `invalid_state`, each naming the job. `traceparent` and
   * `tracestate` apply to every job of the flow.
   */
  async enqueueFlow(jobs: readonly FlowJobSpec[], opts: Omit<EnqueueOptions, "idempotencyKey"> = {}): Promise<Job[]> {
    if (!Array.isArray(jobs) || jobs.length === 0) {
      throw new TypeError("enqueueFlow needs a non-empty array of jobs");
    }
    const body: FlowBody = { jobs: jobs.map((j, i) => flowJobBody(j, `jobs[${i}]`)) };
    const res = await this.#request<JobsResponse>("POST", "/v1/flows", {
      ...opts,
      body,
      headers: enqueueHeaders(opts),
    });
    return res.jobs;
  }

  /**
   * `POST /v1/batches`: opens a batch, whose finishing job (stored
   * `blocked`; its id is the batch's) runs once the batch is sealed and
   * every member has ended; with `on_success`, only if every member
   * succeeds (one that fails for good or is cancelled cancels it).
   *
   * ```ts
   * const b = await client.openBatch({ finisher: { kind: "notify" } });
   * await client.addToBatch(b.id, [{ kind: "thumbnail", payload: { file: "a.png" } }]); // as often as needed
   * await client.sealBatch(b.id);
   * // in the "notify" handler: await client.batch(job.id) counts the members
   * ```
   */
  async openBatch(spec: OpenBatchSpec, opts: Omit<EnqueueOptions, "idempotencyKey"> = {}): Promise<Batch> {
    return this.#request("POST", "/v1/batches", { ...opts, body: openBatchBody(spec), headers: enqueueHeaders(opts) });
  }

  /** `POST /v1/batches/{id}/jobs`: enqueues members, all or none, and
   * resolves with them in order, `pending`. A sealed batch, or one whose
   * finishing job has ended, takes none: InvalidStateError, nothing
   * stored; an id that is no batch is NotFoundError. */
  async addToBatch(id: number, jobs: readonly BatchJobSpec[], opts: Omit<EnqueueOptions, "idempotencyKey"> = {}): Promise<Job[]> {
    if (!Array.isArray(jobs) || jobs.length === 0) throw new TypeError("addToBatch needs a non-empty array of jobs");
    const body: BatchJobsBody = { jobs: jobs.map((j, i) => enqueueBody(j, `jobs[${i}]`)) };
    const path = batchPath(id, "jobs");
    return (await this.#request<JobsResponse>("POST", path, { ...opts, body, headers: enqueueHeaders(opts) })).jobs;
  }

  /** `POST /v1/batches/{id}/seal`: no job joins any more; the finishing
   * job is released once every member has ended (at once if none is
   * left). Sealing again answers the same. */
  async sealBatch(id: number, opts?: RequestOptions): Promise<Batch> {
    return this.#request("POST", batchPath(id, "seal"), { ...opts, body: {} });
  }

  /** `GET /v1/batches/{id}`: the batch with its members counted by state
   * (the finishing job reads its own). An id that is no batch is
   * NotFoundError. */
  async batch(id: number, opts?: RequestOptions): Promise<Batch> {
    return this.#request("GET", batchPath(id), { ...opts });
  }

  // ---- jobs ------------------------------------------------------------

  /** `GET /v1/jobs/{id}`. */
  async getJob(id: number, opts?: RequestOptions): Promise<Job> {
    return this.#request("GET", jobPath(id), { ...opts });
  }

  /** `GET /v1/jobs/{id}/relatives`: the jobs the job runs after
   * (`parents`) and those that run after it (`children`), each in id
   * order with its edge, at most `limit` of each (1 to 1000, server
   * default 100). A job outside flows has none; an unknown id is
   * NotFoundError. */
  async relatives(id: number, query: RelativesQuery = {}, opts?: RequestOptions): Promise<Relatives> {
    return this.#request("GET", jobPath(id, "relatives"), { ...opts, query: { limit: checkLimit(query.limit, 1000) } });
  }

  /** `GET /v1/jobs/{id}/flow`: the jobs connected to the job by edges, in
   * either direction, breadth first from it, at most `limit` (1 to 2000,
   * the server's default), and the edges between them; `truncated` when
   * the graph holds more. An unknown id is NotFoundError. */
  async flowGraph(id: number, query: FlowGraphQuery = {}, opts?: RequestOptions): Promise<FlowGraph> {
    return this.#request("GET", jobPath(id, "flow"), { ...opts, query: { limit: checkLimit(query.limit, 2000) } });
  }

  /**
   * `GET /v1/jobs`: one page of jobs, newest first, matching every filter
   * given. Pass the page's `next_cursor` as `cursor` for the next one (it
   * is null on the last page). With `summary: true` the jobs come without
   * payload, result and errors.
   */
  listJobs(query: ListQuery & { summary: true }, opts?: RequestOptions): Promise<JobPage<JobSummary>>;
  listJobs(query?: ListQuery & { summary?: false }, opts?: RequestOptions): Promise<JobPage<Job>>;
  async listJobs(query: ListQuery = {}, opts?: RequestOptions): Promise<JobPage<Job | JobSummary>> {
    return this.#request("GET", "/v1/jobs", { ...opts, query: { ...query, cursor: query.cursor ?? undefined } });
  }

  /** Every page of a listing, following the cursor from `query.cursor`
   * (or the first page) to the last. */
  listJobPages(query: ListQuery & { summary: true }, opts?: RequestOptions): AsyncGenerator<JobPage<JobSummary>>;
  listJobPages(query?: ListQuery & { summary?: false }, opts?: RequestOptions): AsyncGenerator<JobPage<Job>>;
  async *listJobPages(query: ListQuery = {}, opts?: RequestOptions): AsyncGenerator<JobPage<Job | JobSummary>> {
    let cursor = query.cursor;
    for (;;) {
      const page: JobPage<Job | JobSummary> = await this.#request("GET", "/v1/jobs", {
        ...opts,
        query: { ...query, cursor: cursor ?? undefined },
      });
      yield page;
      if (page.next_cursor === null || page.next_cursor === undefined) return;
      cursor = page.next_cursor;
    }
  }

  /** Every job of a listing, newest first, page by page. */
  iterateJobs(query: ListQuery & { summary: true }, opts?: RequestOptions): AsyncGenerator<JobSummary>;
  iterateJobs(query?: ListQuery & { summary?: false }, opts?: RequestOptions): AsyncGenerator<Job>;
  async *iterateJobs(query: ListQuery = {}, opts?: RequestOptions): AsyncGenerator<Job | JobSummary> {
    for await (const page of this.listJobPages(query as ListQuery & { summary?: false }, opts)) {
      yield* page.jobs;
    }
  }

  /** `POST /v1/jobs/{id}/cancel`: cancels a pending or running job (a
   * running job's claim token goes stale); a finished one is
   * InvalidStateError. With `opts.token`, only while that token is the
   * job's current claim (a worker cancelling its job), else StaleClaimError. */
  async cancelJob(id: number, opts?: RequestOptions & { token?: string }): Promise<Job> {
    const { token, ...rest } = opts ?? {};
    return this.#request("POST", jobPath(id, "cancel"), { ...rest, body: (token === undefined ? {} : { token }) satisfies CancelBody });
  }

  /** `POST /v1/jobs/{id}/retry`: makes a failed or cancelled job pending now
   * with its attempts reset, or a pending job due now. */
  async retryJob(id: number, opts?: RequestOptions): Promise<Job> {
    return this.#request("POST", jobPath(id, "retry"), { ...opts, body: {} });
  }

  /** `POST /v1/jobs/{id}/run`: makes a pending job due now; any other state
   * is InvalidStateError. */
  async runJob(id: number, opts?: RequestOptions): Promise<Job> {
    return this.#request("POST", jobPath(id, "run"), { ...opts, body: {} });
  }

  /** `DELETE /v1/jobs/{id}`: deletes a finished job; a pending or running
   * one is InvalidStateError. */
  async deleteJob(id: number, opts?: RequestOptions): Promise<void> {
    await this.#request("DELETE", jobPath(id), { ...opts });
  }

  /** `POST /v1/bulk/retry`: retries the failed and cancelled jobs matching
   * every filter given (at least one). */
  async bulkRetry(filter: BulkFilter, opts?: RequestOptions): Promise<BulkResult> {
    return this.#request("POST", "/v1/bulk/retry", { ...opts, body: compact<BulkBody>(filter) });
  }

  /** `POST /v1/bulk/cancel`: cancels the pending and running jobs matching
   * every filter given (at least one). */
  async bulkCancel(filter: BulkFilter, opts?: RequestOptions): Promise<BulkResult> {
    return this.#request("POST", "/v1/bulk/cancel", { ...opts, body: compact<BulkBody>(filter) });
  }

  /** `POST /v1/bulk/delete`: deletes the finished jobs matching every filter
   * given (at least one). */
  async bulkDelete(filter: BulkFilter, opts?: RequestOptions): Promise<BulkResult> {
    return this.#request("POST", "/v1/bulk/delete", { ...opts, body: compact<BulkBody>(filter) });
  }

  // ---- working on jobs -------------------------------------------------

  /** `POST /v1/claim`: takes up to `limit` jobs of `queues` (default
   * `["default"]`) for `worker`, each with its claim `token`, held for
   * `lease_seconds` (server default 60) unless heartbeated. With
   * `wait_seconds` the server answers as soon as something is claimable,
   * or with no jobs when the wait ends; the request's timeout grows by the
   * wait. Aborting the signal while it waits claims nothing; through
   * node:http, jobs claimed an instant before still come (release them). */
  async claim(spec: ClaimSpec, opts: RequestOptions = {}): Promise<ClaimedJob[]> {
    return (await this.claimAnswer(spec, opts)).jobs;
  }

  /** `claim` with its whole answer: the jobs and `waited_seconds`, how long
   * the server held the claim before taking them (their leases began later). */
  async claimAnswer(spec: ClaimSpec, opts: RequestOptions = {}): Promise<ClaimResponse> {
    const waitMs = (spec.wait_seconds ?? 0) * 1000;
    return this.#request<ClaimResponse>("POST", "/v1/claim", {
      ...opts,
      body: compact<ClaimBody>(spec),
      timeoutMs: (opts.timeoutMs ?? this.timeoutMs) + waitMs,
    });
  }

  /** `POST /v1/jobs/{id}/heartbeat`: extends the lease to now +
   * `leaseSeconds` (server default 60). StaleClaimError means the job is
   * no longer yours. */
  async heartbeat(id: number, token: string, leaseSeconds?: number, opts?: RequestOptions): Promise<HeartbeatResult> {
    const body: HeartbeatBody = { token };
    if (leaseSeconds !== undefined) body.lease_seconds = leaseSeconds;
    return this.#request("POST", jobPath(id, "heartbeat"), { ...opts, body });
  }

  /** `POST /v1/jobs/{id}/complete`: the job succeeded, with `result` (any
   * JSON value; undefined stores none). A token that is not the job's
   * current claim is StaleClaimError, and changes nothing. */
  async complete(id: number, token: string, result?: unknown, opts?: RequestOptions): Promise<Job> {
    const body: CompleteBody = { token };
    if (result !== undefined) body.result = result;
    return this.#request("POST", jobPath(id, "complete"), { ...opts, body });
  }

  /**
   * `POST /v1/jobs/complete`: completes many claimed jobs in one request
   * (one transaction on the server) and resolves with one result per
   * completion, in order: each succeeds or fails alone, as it would
   * through `complete` (a stale token changes nothing for its job). A
   * server without the route rejects with NotFoundError or
   * MethodNotAllowedError.
   */
  async completeMany(completions: readonly CompletionSpec[], opts?: RequestOptions): Promise<CompletionResult[]> {
    if (!Array.isArray(completions) || completions.length === 0) {
      throw new TypeError("completeMany needs a non-empty array of completions");
    }
    const body: CompleteBatchBody = {
      jobs: completions.map((c) => {
        jobPath(c.id);
        return c.result === undefined ? { id: c.id, token: c.token } : { id: c.id, token: c.token, result: c.result };
      }),
    };
    const res = await this.#request<CompleteBatchResponse>("POST", "/v1/jobs/complete", { ...opts, body });
    return res.results;
  }

  /** `POST /v1/jobs/{id}/fail`: the attempt failed with `error` (and
   * `stack`). With attempts left the job is pending again at `retry_at`
   * (default: the server's backoff); with none left, or `discard`, it
   * fails for good. */
  async fail(id: number, token: string, spec: FailSpec, opts?: RequestOptions): Promise<Job> {
    const { retry_at, ...rest } = spec;
    const body = compact<FailBody>({ ...rest, token });
    if (retry_at !== undefined) body.retry_at = timeOf(retry_at, "retry_at");
    return this.#request("POST", jobPath(id, "fail"), { ...opts, body });
  }

  /** `POST /v1/jobs/{id}/release`: gives the job back unworked: pending
   * again at once, the attempt not counted. */
  async release(id: number, token: string, opts?: RequestOptions): Promise<Job> {
    const body: ReleaseBody = { token };
    return this.#request("POST", jobPath(id, "release"), { ...opts, body });
  }

  /** `POST /v1/jobs/{id}/snooze`: pending again after `seconds`, the attempt
   * not counted. Past the server's snooze limit it is SnoozeLimitError and
   * the job stays running under the claim. */
  async snooze(id: number, token: string, seconds: number, opts?: RequestOptions): Promise<Job> {
    const body: SnoozeBody = { token, seconds };
    return this.#request("POST", jobPath(id, "snooze"), { ...opts, body });
  }

  // ---- queues and stats -------------------------------------------------

  /** `GET /v1/queues`: every queue that has jobs or is paused. */
  async queues(opts?: RequestOptions): Promise<Queue[]> {
    return (await this.#request<QueuesResponse>("GET", "/v1/queues", { ...opts })).queues;
  }

  /** `POST /v1/queues/{name}/pause`: no claim takes the queue's jobs once
   * this resolves; running jobs go on. */
  async pauseQueue(name: string, opts?: RequestOptions): Promise<Queue> {
    return this.#request("POST", `/v1/queues/${segment(name, "queue")}/pause`, { ...opts, body: {} });
  }

  /** `POST /v1/queues/{name}/resume`. */
  async resumeQueue(name: string, opts?: RequestOptions): Promise<Queue> {
    return this.#request("POST", `/v1/queues/${segment(name, "queue")}/resume`, { ...opts, body: {} });
  }

  /** `GET /v1/stats`: job counts by queue and state. */
  async stats(opts?: RequestOptions): Promise<Stats> {
    return this.#request("GET", "/v1/stats", { ...opts });
  }

  // ---- schedules -------------------------------------------------------

  /** `PUT /v1/schedules/{name}`: creates or replaces a schedule whose every
   * tick of `cron` enqueues `job`. */
  async putSchedule(name: string, spec: ScheduleSpec, opts?: RequestOptions): Promise<Schedule> {
    return this.#request("PUT", schedulePath(name), { ...opts, body: compact<ScheduleBody>(spec) });
  }

  /** `GET /v1/schedules`. */
  async listSchedules(opts?: RequestOptions): Promise<Schedule[]> {
    return (await this.#request<SchedulesResponse>("GET", "/v1/schedules", { ...opts })).schedules;
  }

  /** `GET /v1/schedules/{name}`: the schedule with its latest runs. */
  async getSchedule(name: string, opts?: RequestOptions): Promise<Schedule> {
    return this.#request("GET", schedulePath(name), { ...opts });
  }

  /** `DELETE /v1/schedules/{name}`: the jobs it made stay. */
  async deleteSchedule(name: string, opts?: RequestOptions): Promise<void> {
    await this.#request("DELETE", schedulePath(name), { ...opts });
  }

  /** `POST /v1/schedules/{name}/pause`: stops its ticks. */
  async pauseSchedule(name: string, opts?: RequestOptions): Promise<Schedule> {
    return this.#request("POST", schedulePath(name, "pause"), { ...opts, body: {} });
  }

  /** `POST /v1/schedules/{name}/resume`: goes on from the first tick after now. */
  async resumeSchedule(name: string, opts?: RequestOptions): Promise<Schedule> {
    return this.#request("POST", schedulePath(name, "resume"), { ...opts, body: {} });
  }

  /** `POST /v1/schedules/{name}/run`: enqueues the schedule's job due now;
   * the schedule's ticks are unchanged. */
  async runSchedule(name: string, opts?: RequestOptions): Promise<Job> {
    return this.#request("POST", schedulePath(name, "run"), { ...opts, body: {} });
  }

  // ---- limits ----------------------------------------------------------

  /** `PUT /v1/limits/{key}`: declares or replaces the limit of a key or
   * template (`customer:*`). */
  async putLimit(key: string, spec: LimitSpec, opts?: RequestOptions): Promise<Limit> {
    return this.#request("PUT", limitPath(key), { ...opts, body: compact<LimitBody>(spec) });
  }

  /** `GET /v1/limits`: every declared limit with its keys' states. */
  async listLimits(opts?: RequestOptions): Promise<LimitInfo[]> {
    return (await this.#request<LimitsResponse>("GET", "/v1/limits", { ...opts })).limits;
  }

  /** `GET /v1/limits/{key}`: the limit declared for exactly this key or
   * template, with the keys it governs. */
  async getLimit(key: string, opts?: RequestOptions): Promise<LimitInfo> {
    return this.#request("GET", limitPath(key), { ...opts });
  }

  /** `DELETE /v1/limits/{key}`. */
  async deleteLimit(key: string, opts?: RequestOptions): Promise<void> {
    await this.#request("DELETE", limitPath(key), { ...opts });
  }

  /** `POST /v1/limits/{key}/tokens`: takes `n` starts (default 1) from the
   * key's rate, all or none, for work done outside jobs. */
  async takeTokens(key: string, n = 1, opts?: RequestOptions): Promise<TokenGrant> {
    const body: TakeTokensBody = { n };
    return this.#request("POST", limitPath(key, "tokens"), { ...opts, body });
  }
}

