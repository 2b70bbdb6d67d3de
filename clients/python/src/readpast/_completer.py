"""Completions of many jobs sent together: :class:`Completer`."""

from __future__ import annotations

import threading
from typing import Any, List, Optional

from .client import Client
from .errors import ConflictError, MethodNotAllowedError, NotFoundError

# The most completions one request carries (the server's default batch
# limit is 1000).
MAX_BATCH = 500


class _Item:
    __slots__ = ("job_id", "token", "result", "done", "outcome")

    def __init__(self, job_id: int, token: str, result: Any) -> None:
        self.job_id = job_id
        self.token = token
        self.result = result
        self.done = False
        self.outcome: Optional[Any] = None


FALLBACK = object()
"""What :meth:`Completer.complete` returns when the batch could not be
written as a whole: the caller completes its job alone (with its own
retries and its own error)."""


class Completer:
    """Gathers the completions that the worker's jobs send at the same
    time into one ``POST /v1/jobs/complete``: while one batch is being
    written, the completions that arrive wait, and the next caller to
    find no batch in flight sends all of them. No thread of its own: the
    callers take turns sending.

    :meth:`complete` blocks until its job's completion was written (or
    refused), so that the worker holds the job's slot, and its lease, until
    then, as it does for a completion sent alone.

    Once ``gave_up`` is set (the shutdown of the worker's run gave up what
    was still out), it sends nothing more: the completions still waiting,
    behind a batch that hangs, say, get FALLBACK, which the worker gives
    up too.
    """

    def __init__(self, client: Client, gave_up: Optional[threading.Event] = None) -> None:
        self._client = client
        self._gave_up = gave_up if gave_up is not None else threading.Event()
        self._cond = threading.Condition()
        self._queue: List[_Item] = []
        self._sending = False
        self._unsupported = False  # the server has no batch route

    def complete(self, job_id: int, token: str, result: Any) -> Any:
        """Returns None when the job was completed, the APIError that
        refused it (a stale token, a job gone), or FALLBACK."""
        if self._unsupported:
            return FALLBACK
        item = _Item(job_id, token, result)
        with self._cond:
            self._queue.append(item)
        while True:
            with self._cond:
                while not item.done and self._sending:
                    self._cond.wait()
                if item.done:
                    return item.outcome
                if self._gave_up.is_set():
                    self._queue = []  # every caller still waiting sees the same
                    return FALLBACK
                self._sending = True
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            outcomes = self._send(batch)
            with self._cond:
                for it, out in zip(batch, outcomes):
                    it.outcome, it.done = out, True
                self._sending = False
                self._cond.notify_all()

    def _send(self, batch: List[_Item]) -> List[Any]:
        try:
            errs = self._client.complete_many([(it.job_id, it.token, it.result) for it in batch])
        except (MethodNotAllowedError, NotFoundError):
            self._unsupported = True  # an older server: complete one by one
            return [FALLBACK] * len(batch)
        except Exception:  # noqa: BLE001 - whatever went wrong, each job is sent alone
            # No answer, a 5xx or 429, a batch refused whole (a result too
            # large), or an answer not as documented: each job is completed
            # alone, with its retries and its own error.
            return [FALLBACK] * len(batch)
        if len(errs) != len(batch):
            return [FALLBACK] * len(batch)
        out: List[Any] = []
        for e in errs:
            if e is None or isinstance(e, (ConflictError, NotFoundError)):
                out.append(e)
            else:
                out.append(FALLBACK)
        return out


__all__ = ["Completer", "FALLBACK"]
