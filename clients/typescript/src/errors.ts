// The errors of the client. Every error answer of the server has the shape
// {"error": {"code", "message", "field"?}} and becomes the ApiError
// subclass of its code (one class per code of the API's Error schema);
// a request that got no answer is a NetworkError.

import type { ErrorCode } from "./types.js";

/** The base of every error the client throws about the server. */
export class ReadpastError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The request got no usable answer: the server could not be reached, the
 * connection broke, or the answer was not the JSON the API sends. The
 * request may or may not have been applied; the cause is in `cause`.
 */
export class NetworkError extends ReadpastError {}

/** The request took longer than the client's `timeoutMs` (a kind of
 * NetworkError: it may or may not have been applied). */
export class RequestTimeoutError extends NetworkError {}

/** What an error answer carries. */
export interface ApiErrorInit {
  /** The HTTP status. */
  status: number;
  /** The API's error code; `"http_error"` when the answer had none (a
   * proxy's error page). */
  code: string;
  message: string;
  /** The request field or query parameter at fault. */
  field?: string | undefined;
  /** The `Retry-After` header in seconds (429, 503). */
  retryAfter?: number | undefined;
}

/** An error answer of the server: `status`, `code`, `message`, `field`
 * and `retryAfter`. */
export class ApiError extends ReadpastError {
  readonly status: number;
  readonly code: ErrorCode | "http_error" | (string & {});
  readonly field: string | undefined;
  readonly retryAfter: number | undefined;
  /** The server's message, without the status and code. */
  readonly detail: string;

  constructor(init: ApiErrorInit) {
    super(`${init.status} ${init.code}: ${init.message}${init.field ? ` (field ${init.field})` : ""}`);
    this.status = init.status;
    this.code = init.code;
    this.detail = init.message;
    this.field = init.field;
    this.retryAfter = init.retryAfter;
  }
}

/** 400: the request is not valid; nothing changed. */
export class InvalidInputError extends ApiError {}
/** 400 `malformed_json`: the body is not one JSON object. */
export class MalformedJsonError extends InvalidInputError {}
/** 400 `invalid_field`: a field is unknown, mistyped, missing or out of
 * range; `field` names it. */
export class InvalidFieldError extends InvalidInputError {}

/** 401 `unauthorized`: a missing or unknown bearer token. */
export class UnauthorizedError extends ApiError {}

/** 403: the server refuses this client the request. */
export class AccessDeniedError extends ApiError {}
/** 403 `forbidden`: a read-only token used for anything but GET. */
export class ForbiddenError extends AccessDeniedError {}
/** 403 `cross_origin`: a browser's cross-origin write. */
export class CrossOriginError extends AccessDeniedError {}
/** 403 `host_not_allowed`: with authentication off, a Host that is not a
 * loopback or allowed name. */
export class HostNotAllowedError extends AccessDeniedError {}

/** 404 `not_found`: no such job, schedule, limit or route. */
export class NotFoundError extends ApiError {}

/** 405 `method_not_allowed`. */
export class MethodNotAllowedError extends ApiError {}

/** 409: the job's state or claim does not allow the call; nothing changed. */
export class ConflictError extends ApiError {}
/** 409 `stale_token`: the claim token is not the job's current claim (the
 * lease expired, the job was cancelled or finished, or the token is
 * wrong). The job is no longer yours; nothing changed. */
export class StaleClaimError extends ConflictError {}
/** 409 `invalid_state`: the job's state does not allow it, such as
 * cancelling a finished job; nothing changed. */
export class InvalidStateError extends ConflictError {}
/** 409 `snooze_limit`: the job was snoozed as often as the server allows;
 * it is still running under the claim: complete or fail it. */
export class SnoozeLimitError extends ConflictError {}

/** 422 `idempotency_mismatch`: the request's Idempotency-Key is held by a
 * job another request made, whose `field` differs from this one's; send
 * the same request again, or use a new key. Nothing changed. */
export class IdempotencyMismatchError extends ApiError {}

/** 413: the request is over a size limit of the server. */
export class TooLargeError extends ApiError {}
/** 413 `body_too_large`: the body is over `--max-body-bytes`. */
export class BodyTooLargeError extends TooLargeError {}
/** 413 `batch_too_large`: the batch holds more than `--max-batch` jobs. */
export class BatchTooLargeError extends TooLargeError {}

/** 429 `too_many_attempts`: this address sent too many tokens that were
 * not valid; try again after `retryAfter` seconds. */
export class TooManyAttemptsError extends ApiError {}

/** 503 `unavailable`: the database cannot be reached or the server is
 * shutting down; safe to retry after `retryAfter` seconds. */
export class UnavailableError extends ApiError {}

/** 500 `internal`: a server bug (details are in the server's log). */
export class InternalError extends ApiError {}

type ApiErrorClass = new (init: ApiErrorInit) => ApiError;

/** The class of each error code. Typed by the API's code enum: a code
 * added to or removed from the API fails the build until it is here. */
export const errorClasses: { readonly [C in ErrorCode]: ApiErrorClass } = {
  malformed_json: MalformedJsonError,
  invalid_field: InvalidFieldError,
  body_too_large: BodyTooLargeError,
  batch_too_large: BatchTooLargeError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  cross_origin: CrossOriginError,
  host_not_allowed: HostNotAllowedError,
  too_many_attempts: TooManyAttemptsError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  stale_token: StaleClaimError,
  invalid_state: InvalidStateError,
  snooze_limit: SnoozeLimitError,
  idempotency_mismatch: IdempotencyMismatchError,
  unavailable: UnavailableError,
  internal: InternalError,
};

const byStatus: { readonly [status: number]: ApiErrorClass } = {
  400: InvalidInputError,
  401: UnauthorizedError,
  403: AccessDeniedError,
  404: NotFoundError,
  405: MethodNotAllowedError,
  409: ConflictError,
  413: TooLargeError,
  422: IdempotencyMismatchError,
  429: TooManyAttemptsError,
  500: InternalError,
  503: UnavailableError,
};

/** The error of an error answer: by its code, else by its status (a code
 * this client does not know), else a plain ApiError. */
export function errorFromResponse(init: ApiErrorInit): ApiError {
  const cls = Object.hasOwn(errorClasses, init.code)
    ? errorClasses[init.code as ErrorCode]
    : (byStatus[init.status] ?? ApiError);
  return new cls(init);
}
