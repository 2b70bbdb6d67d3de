// The client's types: the API's request and response shapes, taken from
// the types openapi-typescript generates from the server's OpenAPI
// document (httpapi/openapi.json) at build time. A change of the API that
// the client does not follow makes the build fail.

import type { components, operations } from "./generated/openapi.js";

type Schemas = components["schemas"];

/** A job's state. */
export type JobState = Schemas["JobState"];

/** One failed attempt, as a job's `errors` lists it. */
export type AttemptError = Schemas["AttemptError"];

/**
 * A job as the server sends it (times are RFC 3339 strings in UTC). An
 * enqueue answer that found the unique or idempotency key held has
 * `duplicate: true` and is the job holding the key. `keys` lists every
 * key of the job, its `group` first; absent for a job without keys.
 */
export type Job = Schemas["Job"];

/** A job without payload, result and errors (`listJobs({summary: true})`). */
export type JobSummary = Schemas["JobSummary"];

/**
 * W3C trace context a job may carry from its enqueue: the `traceparent`
 * and `tracestate` the producer sent. Servers that do not keep trace
 * context leave them out.
 */
export interface TraceContext {
  traceparent?: string;
  tracestate?: string;
}

/** A job as a claim returns it: with its claim `token`, lease expiry and
 * the trace context it was enqueued with, if any. */
export type ClaimedJob = Schemas["ClaimedJob"] & TraceContext;

/** A time the API takes: a `Date` or an RFC 3339 string. */
export type Time = Date | string;

/**
 * One job to enqueue: the API's enqueue fields (`kind`, `payload`,
 * `queue`, `priority`, `run_at`, `max_attempts`, `group`, `keys`,
 * `unique_key`, `unique_for_seconds`, `tags`), with `run_at` also as a
 * `Date`. `keys` (at most 4) hold the job to the limit of each, the first
 * its group.
 */
export type JobSpec = Input<Omit<Schemas["EnqueueRequest"], "run_at">> & { run_at?: Time | undefined };

/**
 * What becomes of a flow's job when a job it runs after ends without
 * succeeding (failed for good, cancelled): `cancel_child` (the default)
 * cancels it, `run_anyway` counts the edge as satisfied, `hold_child`
 * keeps it blocked until that parent is retried and succeeds (or the job
 * is cancelled).
 */
export type EdgePolicy = NonNullable<Schemas["FlowEdge"]["policy"]>;

/**
 * One edge of a flow's job: the job it runs after, by the `ref` of a job
 * of the same flow or by the `job_id` of a job enqueued before (exactly
 * one of the two; that job must be blocked, pending or running), and the
 * edge's `policy`.
 */
export type FlowEdge = Input<Schemas["FlowEdge"]>;

/**
 * One job of a flow (`enqueueFlow`): the enqueue fields but `unique_key`
 * and `unique_for_seconds`, with `run_at` also as a `Date`; a `ref` the
 * flow's other jobs name it by; and `after`, the jobs it runs after. A job
 * with edges is stored `blocked` until they have succeeded (or ended
 * otherwise, as each edge's policy says).
 */
export type FlowJobSpec = Input<Omit<Schemas["FlowJob"], "run_at" | "after">> & {
  run_at?: Time | undefined;
  after?: readonly FlowEdge[] | undefined;
};

/**
 * One stored edge of a flow: `child_id` runs after `parent_id`.
 * `parent_ref` and `child_ref` are the refs the two jobs had in the flow
 * that stored the edge (absent where a job had none, or was named by
 * id); `state` is `open`, `held` or `done`.
 */
export type Edge = Schemas["Edge"];

/** A job at the other end of one of a job's edges, with the edge; `job`
 * is null when its row is gone (a finished job pruned or deleted). */
export type Relative = Schemas["Relative"];

/** What `relatives` returns: the jobs a job runs after (`parents`) and
 * those that run after it (`children`), each in id order. */
export type Relatives = Schemas["RelativesResponse"];

/** What `flowGraph` returns: the jobs connected to a job by edges,
 * breadth first from it, the edges between them, and whether the graph
 * holds more jobs than listed (`truncated`). */
export type FlowGraph = Schemas["FlowGraph"];

/**
 * One job of a batch, its finishing job or a member (`openBatch`,
 * `addToBatch`): the enqueue fields but `unique_key` and
 * `unique_for_seconds`, with `run_at` also as a `Date`.
 */
export type BatchJobSpec = Input<Omit<Schemas["BatchJob"], "run_at">> & { run_at?: Time | undefined };

/** The body of `openBatch`: the `finisher`, and `on_success` (default
 * false): run it only if every member succeeds. */
export type OpenBatchSpec = Input<Omit<Schemas["OpenBatchRequest"], "finisher">> & { finisher: BatchJobSpec };

/**
 * A batch (`openBatch`, `sealBatch`, `batch`): `id` is its finishing
 * job's. `sealed` is true once no job can join: sealed, or the finishing
 * job has ended. `members` counts the jobs that joined (less those pruned
 * from history since): `live` those blocked, pending or running,
 * `succeeded`, `failed` and `cancelled` how the others ended.
 */
export type Batch = Schemas["Batch"];

/** The query of `relatives`: `limit`, the most parents and the most
 * children (1 to 1000, server default 100). */
export type RelativesQuery = Loose<NonNullable<operations["getJobRelatives"]["parameters"]["query"]>>;

/** The query of `flowGraph`: `limit`, the most jobs (1 to 2000, the
 * server's default). */
export type FlowGraphQuery = Loose<NonNullable<operations["getJobFlow"]["parameters"]["query"]>>;

/** The query of `GET /v1/jobs`: filters (every one given must match),
 * `limit` (page size), `cursor` and `summary`. */
export type ListQuery = Loose<Omit<ListParams, "cursor">> & {
  /** The `next_cursor` of the previous page; null or left out: the first. */
  cursor?: ListParams["cursor"] | null | undefined;
};

type ListParams = NonNullable<operations["listJobs"]["parameters"]["query"]>;

/** T with every property optional and undefined allowed. */
type Loose<T> = { [K in keyof T]?: T[K] | undefined };

/** T as the client takes it: its optional properties may also be
 * undefined (left out of the request). */
export type Input<T> = { [K in keyof T]: object extends Pick<T, K> ? T[K] | undefined : T[K] };

/** The filters of a listing: `queue`, `state`, `kind`, `group`, `tag`. */
export type JobFilter = Omit<ListQuery, "limit" | "cursor" | "summary">;

/** The value of enqueue's `Idempotency-Key` header. */
export type IdempotencyKey = NonNullable<operations["enqueue"]["parameters"]["header"]>["Idempotency-Key"];

/** A page of `listJobs`; `next_cursor` is null on the last page. */
export type ListResponse = Schemas["ListResponse"];

/** What a bulk action matches: at least one field. */
export type BulkFilter = Input<Schemas["BulkRequest"]>;

/** How many jobs a bulk action changed, and the ids it skipped. */
export type BulkResult = Schemas["BulkResponse"];

/** A queue: whether it is paused, and its job counts. */
export type Queue = Schemas["Queue"];

/** Job counts by state. */
export type StateCounts = Schemas["StateCounts"];

/** Job counts by queue and state, and the paused queues. */
export type Stats = Schemas["StatsResponse"];

/** Which server answers: `GET /v1`. */
export type ServerInfo = Schemas["Info"];

/** A schedule: a cron expression and the job each tick enqueues. */
export type Schedule = Schemas["Schedule"];

/** The body of `putSchedule`: `cron`, `job`, and optionally `time_zone`,
 * `catch_up` and `paused`. */
export type ScheduleSpec = Input<Schemas["PutScheduleRequest"]>;

/** A declared limit of a key or template. */
export type Limit = Schemas["Limit"];

/** A limit with the states of the keys it governs. */
export type LimitInfo = Schemas["LimitInfo"];

/** The body of `putLimit`. */
export type LimitSpec = Input<Schemas["PutLimitRequest"]>;

/** The answer of `takeTokens`. */
export type TokenGrant = Schemas["TokenGrant"];

/** The answer of `heartbeat`: the new lease expiry. */
export type HeartbeatResult = Schemas["HeartbeatResponse"];

/** The body of `claim`. */
export type ClaimSpec = Input<Schemas["ClaimRequest"]>;

/** The body of `fail` besides the token: `error`, and optionally `stack`,
 * `retry_at` and `discard`. */
export type FailSpec = Input<Omit<Schemas["FailRequest"], "token" | "retry_at">> & { retry_at?: Time | undefined };

/** One completion of `completeMany` (`POST /v1/jobs/complete`): the job's
 * `id` and claim `token`, and its `result` (any JSON value; undefined
 * stores none). */
export type CompletionSpec = Input<Schemas["CompleteItem"]>;

/** The outcome of one completion of `completeMany`: ok, or the error it
 * would have had alone (`stale_token`, `not_found`; nothing changed for
 * it). */
export type CompletionResult = Schemas["ItemResult"];

/** An error code of the API. */
export type ErrorCode = Schemas["Error"]["error"]["code"];

/** The body of every error answer. */
export type ErrorBody = Schemas["Error"];

// Request bodies as sent, for the client's own checks.
export type EnqueueBody = Schemas["EnqueueRequest"];
export type BatchBody = Schemas["BatchRequest"];
export type FlowBody = Schemas["FlowRequest"];
export type FlowJobBody = Schemas["FlowJob"];
export type OpenBatchBody = Schemas["OpenBatchRequest"];
export type BatchJobsBody = Schemas["BatchJobsRequest"];
export type CompleteBody = Schemas["CompleteRequest"];
export type CompleteBatchBody = Schemas["CompleteBatchRequest"];
export type CompleteBatchResponse = Schemas["CompleteBatchResponse"];
export type FailBody = Schemas["FailRequest"];
export type HeartbeatBody = Schemas["HeartbeatRequest"];
export type ReleaseBody = Schemas["ReleaseRequest"];
export type CancelBody = Schemas["CancelRequest"];
export type SnoozeBody = Schemas["SnoozeRequest"];
export type TakeTokensBody = Schemas["TakeTokensRequest"];
export type ClaimBody = Schemas["ClaimRequest"];
export type BulkBody = Schemas["BulkRequest"];
export type ScheduleBody = Schemas["PutScheduleRequest"];
export type LimitBody = Schemas["PutLimitRequest"];
export type JobsResponse = Schemas["JobsResponse"];
export type ClaimResponse = Schemas["ClaimResponse"];
export type QueuesResponse = Schemas["QueuesResponse"];
export type SchedulesResponse = Schemas["SchedulesResponse"];
export type LimitsResponse = Schemas["LimitsResponse"];
export type HealthStatus = Schemas["Status"];
