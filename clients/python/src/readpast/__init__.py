"""A Python client for readpast's HTTP API, standard library only.

:class:`Client` enqueues and manages jobs (flows and batches too), queues,
schedules and limits; :class:`Worker` claims jobs and runs them with
Python handlers. Errors the server answers with are :class:`APIError`
subclasses named after their code (:class:`NotFoundError`,
:class:`StaleClaimError`, ...).

    import readpast

    client = readpast.Client("http://127.0.0.1:8080", token="...")
    job = client.enqueue("email", {"to": "a@example.com"}, queue="mail")
"""

from ._version import __version__
from .batches import Batch
from .client import DEFAULT_TIMEOUT, Client, trace_headers
from .errors import (
    APIError,
    ConflictError,
    ForbiddenError,
    IdempotencyMismatchError,
    InternalError,
    InvalidInputError,
    InvalidStateError,
    MethodNotAllowedError,
    NotFoundError,
    ReadpastError,
    SnoozeLimitError,
    StaleClaimError,
    TooLargeError,
    TooManyAttemptsError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
)
from .flows import EDGE_POLICIES, After, Edge, FlowGraph, FlowJob, Relative, Relatives
from .models import (
    AttemptError,
    BulkResult,
    Job,
    JobPage,
    JobSpec,
    KeyState,
    Limit,
    Queue,
    Schedule,
    ScheduleJob,
    ScheduleRun,
    ServerInfo,
    StateCounts,
    Stats,
    TokenGrant,
)
from .handler import Cancel, Discard, Handler, JobContext, Snooze
from .worker import Worker

__all__ = [
    "__version__",
    "DEFAULT_TIMEOUT",
    "Client",
    "trace_headers",
    "Worker",
    "JobContext",
    "Handler",
    "Snooze",
    "Cancel",
    "Discard",
    "After",
    "AttemptError",
    "Batch",
    "BulkResult",
    "EDGE_POLICIES",
    "Edge",
    "FlowGraph",
    "FlowJob",
    "Relative",
    "Relatives",
    "Job",
    "JobPage",
    "JobSpec",
    "KeyState",
    "Limit",
    "Queue",
    "Schedule",
    "ScheduleJob",
    "ScheduleRun",
    "ServerInfo",
    "StateCounts",
    "Stats",
    "TokenGrant",
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
    "IdempotencyMismatchError",
    "TooLargeError",
    "TooManyAttemptsError",
    "UnavailableError",
    "InternalError",
]
