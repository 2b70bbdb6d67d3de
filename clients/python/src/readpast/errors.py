"""The exceptions of the readpast client.

Every error response of the server has the same JSON shape::

    {"error": {"code": "invalid_field", "message": "...", "field": "priority"}}

and becomes an :class:`APIError` subclass chosen by its ``code`` (then by
its HTTP status, for a code this client does not know), carrying the
status, the code, the message and the field. A request that never got an
answer (no connection, a timeout, a broken response) is a
:class:`TransportError`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

__all__ = [
    "ReadpastError",
    "TransportError",
    "APIError",
    "InvalidInputError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "MethodNotAllowedError",
    "ConflictError",
    "StaleClaimError",
    "InvalidStateError",
    "SnoozeLimitError",
    "TooLargeError",
    "TooManyAttemptsError",
    "UnavailableError",
    "InternalError",
    "error_from_response",
]


class ReadpastError(Exception):
    """The base of every exception the client raises about the server."""


class TransportError(ReadpastError):
    """The request got no usable answer: the server could not be reached,
    the connection broke, the call timed out, or the answer was not the
    JSON the API sends. The request may or may not have been applied (see
    the API guide on lost answers); the cause is in ``__cause__``."""


class APIError(ReadpastError):
    """An error answer of the server.

    Attributes:
        status: the HTTP status (404).
        code: the API's error code (``"not_found"``); ``"http_error"`` when
            the answer did not carry one (a proxy's error page).
        message: the server's message.
        field: the JSON field or query parameter at fault, or None.
        retry_after: the ``Retry-After`` header in seconds (429, 503), or
            None.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        text = "%d %s: %s" % (status, code, message)
        if field:
            text += " (field %s)" % field
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after

    def __reduce__(self) -> Any:
        return (type(self), (self.status, self.code, self.message, self.field, self.retry_after))


class InvalidInputError(APIError):
    """400: the body is not one JSON object (``malformed_json``), or a field
    is unknown, mistyped, missing or out of range (``invalid_field``; see
    ``field``). Nothing changed."""


class UnauthorizedError(APIError):
    """401 ``unauthorized``: a missing or unknown bearer token."""


class ForbiddenError(APIError):
    """403: a read-only token used for a write (``forbidden``), a browser's
    cross-origin write (``cross_origin``), or a Host the server does not
    answer while authentication is off (``host_not_allowed``)."""


class NotFoundError(APIError):
    """404 ``not_found``: no such job, schedule, limit or route (the message
    says which)."""


class MethodNotAllowedError(APIError):
    """405 ``method_not_allowed``."""


class ConflictError(APIError):
    """409: the job's state or claim does not allow the call. Nothing
    changed."""


class StaleClaimError(ConflictError):
    """409 ``stale_token``: the claim token is not the job's current claim
    (wrong, or the claim ended: lease expired, job cancelled or finished).
    The job is no longer yours; nothing changed."""


class InvalidStateError(ConflictError):
    """409 ``invalid_state``: the job's state does not allow it, such as
    cancelling a succeeded job. Nothing changed."""


class SnoozeLimitError(ConflictError):
    """409 ``snooze_limit``: the job was snoozed as often as the server
    allows; it is still running under the claim: fail or complete it."""


class IdempotencyMismatchError(APIError):
    """422 ``idempotency_mismatch``: the request's Idempotency-Key is held by
    a job another request made, whose ``field`` differs from this one's;
    send the same request again, or use a new key. Nothing changed."""


class TooLargeError(APIError):
    """413: the body (``body_too_large``) or the batch (``batch_too_large``)
    is over the server's limit."""


class TooManyAttemptsError(APIError):
    """429 ``too_many_attempts``: this address sent too many tokens that
    were not valid; try again after ``retry_after`` seconds."""


class UnavailableError(APIError):
    """503 ``unavailable``: the database cannot be reached or the server is
    shutting down; safe to retry after ``retry_after`` seconds."""


class InternalError(APIError):
    """500 ``internal``: a server bug (details are in the server's log)."""


_BY_CODE: Dict[str, Type[APIError]] = {
    "malformed_json": InvalidInputError,
    "invalid_field": InvalidInputError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "cross_origin": ForbiddenError,
    "host_not_allowed": ForbiddenError,
    "not_found": NotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "stale_token": StaleClaimError,
    "invalid_state": InvalidStateError,
    "snooze_limit": SnoozeLimitError,
    "idempotency_mismatch": IdempotencyMismatchError,
    "body_too_large": TooLargeError,
    "batch_too_large": TooLargeError,
    "too_many_attempts": TooManyAttemptsError,
    "unavailable": UnavailableError,
    "internal": InternalError,
}

_BY_STATUS: Dict[int, Type[APIError]] = {
    400: InvalidInputError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: TooLargeError,
    422: IdempotencyMismatchError,
    429: TooManyAttemptsError,
    500: InternalError,
    503: UnavailableError,
}


def error_from_response(
    status: int,
    code: str,
    message: str,
    field: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> APIError:
    """Returns the exception for an error answer: by code, else by status,
    else a plain :class:`APIError`."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or APIError
    return cls(status, code, message, field, retry_after)
