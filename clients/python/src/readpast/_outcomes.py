"""What happens to one claimed job in a :class:`readpast.Worker`: its
state shared between threads (``_Run``), and the calls that send its one
outcome (``_Outcomes``, a part of the Worker), retried while they may
pass."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, Optional, Tuple, Type

from ._completer import FALLBACK, Completer
from .client import Client
from .errors import (
    APIError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    ReadpastError,
    SnoozeLimitError,
    TooLargeError,
    TooManyAttemptsError,
    TransportError,
)
from .handler import Cancel, Discard, JobContext, Snooze
from .models import Job

# The most of an error message and of a stack a failure sends: the server
# keeps every attempt's error with the job, and refuses bodies over its
# --max-body-bytes.
MAX_MESSAGE = 8 * 1024
MAX_STACK = 64 * 1024


class _Outcome:
    """What a handler did: returned value, or raised exc with its trace."""

    def __init__(self, value: Any = None, exc: Optional[BaseException] = None, stack: str = "") -> None:
        self.value = value
        self.exc = exc
        self.stack = stack


class _Session:
    """One run() of a Worker: what the outcomes and releases of the jobs
    it claimed share, apart from every other run's. Each job keeps its
    own run's, so that what an earlier run left behind (a batch stuck, a
    release still trickling, an outcome given up) acts only on that run's,
    never on the next one's."""

    def __init__(self, client: Client) -> None:
        self.gave_up = threading.Event()  # the shutdown gave up what was still out
        # Completions that finish together go in one request.
        self.completer = Completer(client, self.gave_up)
        self.releasing = 0  # releases of jobs claimed while stopping; guarded by the worker's _cond
        self.release_until = 0.0  # when the last release at shutdown gives up; guarded by the worker's _cond


class _Run:
    """One claimed job in this worker, and what its handler thread, the
    watcher and the shutdown share about it."""

    def __init__(self, job: Job, ctx: JobContext, lease_end: float, timeout: Optional[float],
                 next_beat: float, session: _Session) -> None:
        self.job = job
        self.ctx = ctx
        self.session = session  # the run() that claimed it
        self.timeout = timeout
        self.lease_end = lease_end  # time.monotonic() when the lease ends
        self.next_beat = next_beat  # when the watcher heartbeats it next
        self.beating = False  # a heartbeat is in flight; guarded by the worker's _cond
        self.thread_ident: Optional[int] = None  # the handler's thread
        self._lock = threading.Lock()
        self._decided = False

    def decide(self) -> bool:
        """Takes the right to send the job's one outcome (complete, fail,
        snooze, cancel, release) or to drop it (the claim was lost):
        True for the first caller only."""
        with self._lock:
            if self._decided:
                return False
            self._decided = True
            return True

    @property
    def decided(self) -> bool:
        with self._lock:
            return self._decided

class _Outcomes:
    """The Worker's calls about one job: heartbeats, and the outcome
    (complete, fail, snooze, cancel), each sent once."""

    client: Client
    name: str
    log: logging.Logger
    lease_seconds: float
    heartbeat_interval: float
    counts: Dict[str, int]
    _cond: threading.Condition

    def _renew(self, run: _Run) -> Optional[str]:
        """Extends the lease; the error's code when the claim is gone, None
        when it was extended or the heartbeat got no answer."""
        job = run.job
        started = time.monotonic()
        # Within about an interval: a heartbeat with no answer must not
        # hold up the next one until the lease is gone.
        wait = max(1.0, min(self.heartbeat_interval, run.lease_end - started))
        try:
            self.client.heartbeat(job.id, job.token or "", self.lease_seconds, timeout=wait)
            run.lease_end = started + self.lease_seconds
            return None
        except (ConflictError, NotFoundError) as e:
            return e.code
        except ReadpastError as e:
            self.log.warning("worker %s: job %d: heartbeat: %s", self.name, job.id, e)
            return None

    def _lost(self, run: _Run, code: str) -> None:
        """The claim of run is gone: its handler's context is cancelled and
        its outcome dropped."""
        run.ctx._cancel("the job's claim was lost: %s" % code)
        self._count("lost")
        self.log.warning("worker %s: job %d: claim lost (%s); its outcome will be dropped",
                         self.name, run.job.id, code)

    def _timed_out(self, run: _Run, timeout: float) -> None:
        run.ctx._cancel("the handler timed out")
        self._count("timed_out")
        stack = ""
        ident = run.thread_ident
        frame = sys._current_frames().get(ident) if ident is not None else None
        if frame is not None:
            stack = "the handler was at:\n" + "".join(traceback.format_stack(frame))
        self.log.warning("worker %s: job %d: handler timed out after %gs", self.name, run.job.id, timeout)
        self._fail(run, "handler timed out after %gs" % timeout, stack)

    def _record(self, run: _Run, out: _Outcome) -> None:
        job = run.job
        session = run.session  # the job's run's, whatever run() is the worker's now
        value: Any = out.exc if out.exc is not None else out.value
        if isinstance(value, Snooze):
            try:
                if self._call(session, job, "snooze",
                              lambda: self.client.snooze(job.id, job.token or "", value.seconds), run.lease_end,
                              reraise=(SnoozeLimitError, InvalidInputError)) is not None:
                    self._count("snoozed")
            except (SnoozeLimitError, InvalidInputError) as e:
                self._fail(run, "could not snooze: %s" % e.message, out.stack)
            return
        if isinstance(value, Cancel):
            # With the claim's token: a claim gone stale (the job rescued,
            # perhaps running elsewhere) cancels nothing.
            if self._call(session, job, "cancel", lambda: self.client.cancel_job(job.id, job.token or ""),
                          run.lease_end) is not None:
                self._count("cancelled")
                self.log.info("worker %s: job %d cancelled by its handler: %s", self.name, job.id, value)
            return
        if isinstance(value, Discard):
            self._fail(run, str(value), out.stack, discard=True)
            return
        if out.exc is not None:
            e = out.exc
            self._fail(run, "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__, out.stack)
            return
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            self._fail(run, "the handler's result is not JSON: %s" % e, "")
            return
        sent = session.completer.complete(job.id, job.token or "", value)
        if sent is None:
            self._count("succeeded")
            return
        if sent is not FALLBACK:  # refused: the claim is gone
            self._count("lost")
            self.log.warning("worker %s: job %d: complete refused (%s): the job is no longer ours",
                             self.name, job.id, sent.code)
            return
        try:
            done = self._call(session, job, "complete",
                              lambda: self.client.complete(job.id, job.token or "", value), run.lease_end,
                              reraise=(InvalidInputError, TooLargeError))
        except (InvalidInputError, TooLargeError) as e:
            self._fail(run, "the server refused the handler's result: %s" % e.message, "")
            return
        if done is not None:
            self._count("succeeded")

    def _fail(self, run: _Run, message: str, stack: str, discard: bool = False) -> None:
        job = run.job
        message = message[:MAX_MESSAGE]
        if len(stack) > MAX_STACK:
            stack = stack[: MAX_STACK // 2] + "\n…\n" + stack[-MAX_STACK // 2:]
        self.log.info("worker %s: job %d (%s) attempt %d failed%s: %s", self.name, job.id, job.kind,
                      job.attempt, " for good" if discard else "", message)
        if self._call(run.session, job, "fail", lambda: self.client.fail(job.id, job.token or "", message,
                                                                         stack=stack or None, discard=discard),
                      run.lease_end) is not None:
            self._count("discarded" if discard else "failed")

    def _call(self, session: _Session, job: Job, what: str, fn: Callable[[], Any], lease_end: float,
              reraise: Tuple[Type[BaseException], ...] = (), grace: float = 1.0) -> Any:
        """Calls fn, retrying what may pass (no connection, 429, 5xx) until
        the lease ends (or grace seconds from now, if later), and not once
        the shutdown of session (the run that claimed the job) gave up.
        Returns its answer, or None when it was refused (the claim is gone)
        or given up on; raises the errors in reraise."""
        gave_up = session.gave_up
        deadline = max(lease_end, time.monotonic() + grace)
        backoff = 0.1
        while True:
            if gave_up.is_set():
                self.log.error("worker %s: job %d: %s given up at the shutdown's bound (the lease will expire "
                               "and the job run again)", self.name, job.id, what)
                return None
            try:
                return fn()
            except reraise:
                raise
            except (ConflictError, NotFoundError) as e:
                self._count("lost")
                self.log.warning("worker %s: job %d: %s refused (%s): the job is no longer ours",
                                 self.name, job.id, what, e.code)
                return None
            except ReadpastError as e:
                passing = isinstance(e, TransportError) or (
                    isinstance(e, APIError) and (e.status >= 500 or isinstance(e, TooManyAttemptsError)))
                pause = backoff
                if isinstance(e, APIError) and e.retry_after:
                    pause = max(pause, e.retry_after)
                if not passing or time.monotonic() + pause > deadline:
                    self.log.error("worker %s: job %d: %s: %s (given up: the lease will expire and the job "
                                   "run again)", self.name, job.id, what, e)
                    return None
                self.log.warning("worker %s: job %d: %s: %s; trying again", self.name, job.id, what, e)
                gave_up.wait(pause)
                backoff = min(backoff * 2, 2.0)

    def _count(self, what: str) -> None:
        with self._cond:
            self.counts[what] += 1
