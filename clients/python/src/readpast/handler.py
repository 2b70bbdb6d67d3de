"""What a handler gets and what it may return or raise besides a result:
:class:`JobContext`, :class:`Snooze`, :class:`Cancel` and
:class:`Discard`."""

from __future__ import annotations

import datetime as _dt
import threading
from typing import Any, Callable, Dict, Optional, Union

from .models import Job, to_seconds

__all__ = ["JobContext", "Handler", "Snooze", "Cancel", "Discard"]


class Snooze(Exception):
    """Returned or raised by a handler: the job is pending again after
    ``seconds`` (a number or a timedelta), the attempt not counted.

    Past the server's snooze limit (``--max-snoozes``) the attempt fails
    instead."""

    def __init__(self, seconds: Union[float, _dt.timedelta]) -> None:
        self.seconds = to_seconds(seconds, "seconds")
        super().__init__("snoozed for %gs" % self.seconds)


class Cancel(Exception):
    """Returned or raised by a handler: the job is cancelled (state
    ``cancelled``), not retried. ``reason`` goes to the worker's log."""

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "cancelled by its handler")


class Discard(Exception):
    """Returned or raised by a handler: the attempt fails and the job is
    failed for good whatever attempts remain, with ``reason`` recorded as
    the attempt's error."""

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "discarded by its handler")


class JobContext:
    """What a handler gets: the claimed :class:`Job` and a way to notice
    that its work is no longer wanted.

    ``cancelled`` is set when the handler should stop: its timeout passed,
    the job's claim was lost (it was cancelled, or its lease expired), or
    the worker stopped and released the job. Python cannot stop a thread:
    a handler that runs long should look at it (``ctx.cancelled.wait(1)``
    instead of ``time.sleep(1)``); whatever it returns after that is
    dropped. ``cancel_reason`` says why.
    """

    def __init__(self, job: Job, worker: str, deadline: Optional[float]) -> None:
        self.job = job
        self.worker = worker
        # time.monotonic() past which the handler times out, or None.
        self.deadline = deadline
        self.cancelled = threading.Event()
        self.cancel_reason: Optional[str] = None

    @property
    def id(self) -> int:
        return self.job.id

    @property
    def kind(self) -> str:
        return self.job.kind

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def parent_results(self) -> Optional[Dict[str, Any]]:
        """The results of the job's parents by ref, when the worker was
        made with ``parent_results=True`` and the job runs after others;
        else None (see :class:`readpast.Worker`)."""
        return self.job.parent_results

    @property
    def attempt(self) -> int:
        return self.job.attempt

    def _cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        self.cancelled.set()

    def __repr__(self) -> str:
        return "JobContext(job=%d, kind=%r, attempt=%d)" % (self.job.id, self.job.kind, self.job.attempt)


Handler = Callable[[JobContext], Any]
"""A handler takes the job's context and returns the job's result (any
JSON value, or None), or a :class:`Snooze`, :class:`Cancel` or
:class:`Discard`; or raises: any other exception fails the attempt, which
the server retries with backoff until the job's ``max_attempts``."""
