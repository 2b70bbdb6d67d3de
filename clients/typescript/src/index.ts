// @readpast/client: a client and a worker for readpast's HTTP API.

export { Client, DEFAULT_TIMEOUT_MS } from "./client.js";
export type { ClientOptions, EnqueueOptions, JobPage, RequestOptions } from "./client.js";
export * from "./errors.js";
export { Cancel, Discard, HandlerTimeoutError, JobLostError, Snooze, WorkerStoppedError } from "./handler.js";
export type { Handler, JobContext } from "./handler.js";
export { shutdownOnSignals } from "./signals.js";
export type { ShutdownSignals, ShutdownSignalsOptions } from "./signals.js";
export type { OpenTelemetryApi } from "./tracing.js";
export type * from "./types.js";
export { VERSION } from "./version.js";
export { Worker } from "./worker.js";
export type { Logger, WorkerCounts, WorkerOptions } from "./worker.js";
