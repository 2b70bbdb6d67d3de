"""A worker that runs readpast jobs with Python handlers: :class:`Worker`."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import sys
import threading
import time
import traceback
from types import FrameType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from .client import Client
from .errors import (
    APIError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    ReadpastError,
    SnoozeLimitError,
    TooLargeError,
    TooManyAttemptsError,
    TransportError,
    UnauthorizedError,
)
from .handler import Cancel, Discard, Handler, JobContext, Snooze
from .models import Job

__all__ = ["Worker"]

log = logging.getLogger("readpast.worker")

# The most of an error message and of a stack a failure sends: the server
# keeps every attempt's error with the job, and refuses bodies over its
# --max-body-bytes.
MAX_MESSAGE = 8 * 1024
MAX_STACK = 64 * 1024

# How often the waiting threads look at the stop flag a signal sets.
_POLL = 0.1

# The pause after a claim that found nothing, when claims do not wait
# (wait_seconds=0).
_IDLE_POLL = 1.0

# The longest pause between two claims after failed ones.
_CLAIM_BACKOFF_MAX = 5.0


class _Outcome:
    """What a handler did: returned value, or raised exc with its trace."""

    def __init__(self, value: Any = None, exc: Optional[BaseException] = None, stack: str = "") -> None:
        self.value = value
        self.exc = exc
        self.stack = stack


class _Run:
    """One claimed job in this worker: its handler thread and the state the
    job's supervisor thread and the worker share."""

    def __init__(self, job: Job, ctx: JobContext, lease_end: float) -> None:
        self.job = job
        self.ctx = ctx
        self.lease_end = lease_end  # time.monotonic() when the lease ends
        self.outcome: Optional[_Outcome] = None
        self.done = threading.Event()  # the handler returned or raised
        self.wake = threading.Event()  # something for the supervisor to look at
        self.release = False  # the worker's shutdown takes the job back
        self.thread: Optional[threading.Thread] = None


class Worker:
    """Runs jobs of ``queues`` with ``handlers`` (a mapping of job kind to
    :data:`Handler`), up to ``concurrency`` at once, each in a thread of
    its own.

    The worker long-polls ``POST /v1/claim`` (``wait_seconds``) for as
    many jobs as it has free slots, holds each for ``lease_seconds`` and
    heartbeats it every ``heartbeat_interval`` (a third of the lease by
    default) while its handler runs, then records the outcome:

    - a return value completes the job with it as the result;
    - :class:`Snooze` (returned or raised) snoozes it, :class:`Cancel`
      cancels it, :class:`Discard` fails it for good;
    - any other exception fails the attempt with ``"Type: message"`` and
      the traceback, and the server retries it with backoff;
    - a handler running past ``handler_timeout`` seconds (or the timeout
      given to :meth:`register`) fails the attempt with the stack where it
      was, and its context is cancelled;
    - a job whose kind has no handler fails its attempt.

    Calls that may pass (no connection, 429, 5xx) are retried until the
    job's lease ends; past that the server rescues the job and it runs
    again. A claim token gone stale (the job was cancelled, or its lease
    expired) cancels the handler's context and drops its outcome.

    :meth:`run` blocks until :meth:`stop`, or SIGTERM or SIGINT when it
    runs in the main thread. Stopping, the worker claims no more, lets
    running handlers finish for up to ``shutdown_timeout`` seconds, then
    releases the jobs still running, which are pending again at once
    without an attempt counted; a second signal releases them at once.
    """

    def __init__(
        self,
        client: Client,
        queues: Sequence[str] = ("default",),
        handlers: Optional[Mapping[str, Handler]] = None,
        *,
        concurrency: int = 1,
        name: Optional[str] = None,
        lease_seconds: float = 30.0,
        heartbeat_interval: Optional[float] = None,
        wait_seconds: float = 20.0,
        handler_timeout: Optional[float] = None,
        shutdown_timeout: float = 30.0,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        if isinstance(queues, str):
            raise TypeError("queues must be a list of queue names, not one string")
        if not queues:
            raise ValueError("queues must name at least one queue")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError("concurrency must be an int of at least 1")
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        if heartbeat_interval is not None and not 0 < heartbeat_interval < lease_seconds:
            raise ValueError("heartbeat_interval must be positive and shorter than lease_seconds")
        if not 0 <= wait_seconds <= 300:
            raise ValueError("wait_seconds must be between 0 and 300")
        if handler_timeout is not None and handler_timeout <= 0:
            raise ValueError("handler_timeout must be positive")
        if shutdown_timeout < 0:
            raise ValueError("shutdown_timeout must not be negative")
        self.client = client
        self.queues: List[str] = list(queues)
        self.concurrency = concurrency
        self.name = name or "py-%s-%d" % (socket.gethostname().split(".")[0] or "host", os.getpid())
        self.lease_seconds = float(lease_seconds)
        self.heartbeat_interval = float(heartbeat_interval or lease_seconds / 3.0)
        self.wait_seconds = float(wait_seconds)
        self.handler_timeout = handler_timeout
        self.shutdown_timeout = float(shutdown_timeout)
        self.log = logger or log
        self._handlers: Dict[str, Handler] = {}
        self._timeouts: Dict[str, Optional[float]] = {}
        for kind, fn in (handlers or {}).items():
            self.register(kind, fn)

        self._cond = threading.Condition()
        self._runs: Dict[int, _Run] = {}  # by job id; guarded by _cond
        self._supervisors: List[threading.Thread] = []  # guarded by _cond
        self._stopping = threading.Event()
        self._stop_deadline: Optional[float] = None  # guarded by _cond
        self._signals = 0  # set by the signal handler, read by run()
        self._conn: Any = None  # the claim's connection while it waits
        self._fatal: Optional[BaseException] = None
        self._running = False
        self.counts: Dict[str, int] = {
            k: 0 for k in ("claimed", "succeeded", "failed", "snoozed", "cancelled", "discarded",
                           "released", "timed_out", "lost")
        }

    # ---- configuration ---------------------------------------------------

    def register(self, kind: str, handler: Handler, *, timeout: Optional[float] = None) -> None:
        """Adds (or replaces) the handler of ``kind``; ``timeout`` overrides
        the worker's ``handler_timeout`` for it."""
        if not callable(handler):
            raise TypeError("the handler of %r is not callable" % (kind,))
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        self._handlers[kind] = handler
        self._timeouts[kind] = timeout

    def handler(self, kind: str, *, timeout: Optional[float] = None) -> Callable[[Handler], Handler]:
        """A decorator form of :meth:`register`."""

        def add(fn: Handler) -> Handler:
            self.register(kind, fn, timeout=timeout)
            return fn

        return add

    # ---- running ---------------------------------------------------------

    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Claims and runs jobs until stopped, then shuts down gracefully
        (see the class). In the main thread, SIGTERM and SIGINT stop it
        (their previous handlers are restored on return). Raises the claim's
        error when the server refuses it for good (a bad queue name, a
        token that is not valid)."""
        with self._cond:
            if self._running:
                raise RuntimeError("this worker is running already")
            self._running = True
        previous: Dict[int, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            self.log.info("worker %s: waiting for jobs on %s", self.name, ", ".join(self.queues))
            claimer = threading.Thread(target=self._claim_loop, name="readpast-claim", daemon=True)
            claimer.start()
            seen = 0
            while claimer.is_alive():
                if self._signals != seen:
                    seen = self._signals
                    self.log.info("worker %s: signal received; stopping", self.name)
                    self.stop(timeout=0 if seen > 1 else None)
                if self._stopping.is_set():
                    self._abort_claim()
                claimer.join(_POLL)
            self._shutdown(lambda: self._signals != seen)
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
            with self._cond:
                self._running = False
        if self._fatal is not None:
            raise self._fatal

    def start(self) -> threading.Thread:
        """Runs :meth:`run` in a background thread (no signal handlers) and
        returns it; :meth:`stop` it and join the thread."""
        t = threading.Thread(target=self.run, kwargs={"install_signal_handlers": False},
                             name="readpast-worker", daemon=True)
        t.start()
        return t

    def stop(self, timeout: Optional[float] = None) -> None:
        """Asks the worker to stop: no more claims, running jobs get
        ``timeout`` seconds (default ``shutdown_timeout``) to finish before
        they are released. Returns at once; calling it again can only
        shorten the wait. Do not call it from a signal handler: :meth:`run`
        installs its own."""
        wait = self.shutdown_timeout if timeout is None else max(0.0, timeout)
        with self._cond:
            deadline = time.monotonic() + wait
            if self._stop_deadline is None or deadline < self._stop_deadline:
                self._stop_deadline = deadline
            self._stopping.set()
            self._cond.notify_all()
        self._abort_claim()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called (or a signal came)."""
        return self._stopping.is_set()

    def running_jobs(self) -> List[int]:
        """The ids of the jobs this worker holds now."""
        with self._cond:
            return sorted(self._runs)

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        # Only a counter: a signal handler must not take locks the main
        # thread may hold. run() sees it within _POLL, and the claim's
        # socket is shut so that its long poll ends.
        self._signals += 1
        self._abort_claim()

    def _abort_claim(self) -> None:
        """Ends the claim's long poll by shutting its socket: the server
        claims nothing for a client that went away while waiting."""
        conn = self._conn
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _set_conn(self, conn: Any) -> None:
        self._conn = conn

    # ---- claiming --------------------------------------------------------

    def _claim_loop(self) -> None:
        try:
            self._claim_until_stopped()
        except BaseException as e:  # a bug: stop rather than hang with no claims
            self.log.exception("worker %s: claiming", self.name)
            self._fatal = e
            self.stop()

    def _claim_until_stopped(self) -> None:
        backoff = 0.0
        while not self._stopping.is_set():
            with self._cond:
                while len(self._runs) >= self.concurrency and not self._stopping.is_set():
                    self._cond.wait(_POLL * 5)
                free = self.concurrency - len(self._runs)
            if self._stopping.is_set():
                break
            started = time.monotonic()
            try:
                jobs = self.client._claim(self.name, self.queues, free, self.lease_seconds, self.wait_seconds,
                                          self._set_conn)
                backoff = 0.0
            except (InvalidInputError, UnauthorizedError, ForbiddenError, NotFoundError) as e:
                self.log.error("worker %s: claim refused: %s", self.name, e)
                self._fatal = e
                self.stop()
                break
            except ReadpastError as e:
                if self._stopping.is_set():
                    break
                backoff = min(max(backoff * 2, 0.1), _CLAIM_BACKOFF_MAX)
                pause = random.uniform(backoff / 2, backoff)
                if isinstance(e, APIError) and e.retry_after:
                    pause = max(pause, e.retry_after)
                self.log.warning("worker %s: claim: %s; trying again in %.2fs", self.name, e, pause)
                self._stopping.wait(pause)
                continue
            finally:
                self._conn = None
            if not jobs and self.wait_seconds == 0:
                self._stopping.wait(_IDLE_POLL)  # no long poll: do not spin
            lease_end = started + self.lease_seconds
            for job in jobs:
                with self._cond:
                    self.counts["claimed"] += 1
                    stopping = self._stopping.is_set()
                if stopping:
                    self._release_unstarted(job, lease_end)
                else:
                    self._start(job, lease_end)

    def _release_unstarted(self, job: Job, lease_end: float) -> None:
        self.log.info("worker %s: job %d claimed while stopping; releasing it", self.name, job.id)
        if self._call(job, "release", lambda: self.client.release(job.id, job.token or ""), lease_end) is not None:
            self._count("released")

    def _start(self, job: Job, lease_end: float) -> None:
        timeout = self._timeouts.get(job.kind) or self.handler_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        ctx = JobContext(job, self.name, deadline)
        run = _Run(job, ctx, lease_end)
        sup = threading.Thread(target=self._supervise, args=(run, timeout),
                               name="readpast-job-%d" % job.id, daemon=True)
        with self._cond:
            self._runs[job.id] = run
            self._supervisors = [t for t in self._supervisors if t.is_alive()]
            self._supervisors.append(sup)
        sup.start()

    # ---- one job ---------------------------------------------------------

    def _supervise(self, run: _Run, timeout: Optional[float]) -> None:
        """Runs one job: starts its handler, heartbeats until it ends, times
        out, or is released, and records the outcome. Every call about the
        job is made here, so that only one outcome is ever sent."""
        job = run.job
        try:
            handler = self._handlers.get(job.kind)
            if handler is None:
                self._fail(run, "no handler registered for kind %r" % job.kind, "")
                return
            run.thread = threading.Thread(target=self._call_handler, args=(run, handler),
                                          name="readpast-handler-%d" % job.id, daemon=True)
            run.thread.start()
            next_beat = time.monotonic() + self.heartbeat_interval
            while True:
                run.wake.clear()
                if run.done.is_set():
                    break
                if run.release:
                    run.ctx._cancel("the worker stopped and released the job")
                    self.log.warning("worker %s: job %d still running at the shutdown deadline; releasing it",
                                     self.name, job.id)
                    if self._call(job, "release", lambda: self.client.release(job.id, job.token or ""),
                                  run.lease_end) is not None:
                        self._count("released")
                    return
                now = time.monotonic()
                if run.ctx.deadline is not None and now >= run.ctx.deadline:
                    self._timed_out(run, timeout or 0.0)
                    return
                if now >= next_beat:
                    if not self._beat(run):
                        return
                    next_beat = time.monotonic() + self.heartbeat_interval
                    continue
                wait = next_beat - now
                if run.ctx.deadline is not None:
                    wait = min(wait, run.ctx.deadline - now)
                run.wake.wait(max(wait, 0.0))
            self._record(run, run.outcome or _Outcome())
        except Exception:  # a bug here must not lose the slot
            self.log.exception("worker %s: job %d", self.name, job.id)
        finally:
            with self._cond:
                self._runs.pop(job.id, None)
                self._cond.notify_all()

    def _call_handler(self, run: _Run, handler: Handler) -> None:
        try:
            run.outcome = _Outcome(value=handler(run.ctx))
        except BaseException as e:  # noqa: B902 - a handler's SystemExit fails its job too
            run.outcome = _Outcome(exc=e, stack=traceback.format_exc())
        finally:
            run.done.set()
            run.wake.set()

    def _beat(self, run: _Run) -> bool:
        """Extends the lease; False when the claim is gone (the handler's
        context is then cancelled and its outcome dropped)."""
        job = run.job
        started = time.monotonic()
        try:
            self.client.heartbeat(job.id, job.token or "", self.lease_seconds)
            run.lease_end = started + self.lease_seconds
            return True
        except (ConflictError, NotFoundError) as e:
            run.ctx._cancel("the job's claim was lost: %s" % e.code)
            self._count("lost")
            self.log.warning("worker %s: job %d: claim lost (%s); its outcome will be dropped",
                             self.name, job.id, e.code)
            return False
        except ReadpastError as e:
            self.log.warning("worker %s: job %d: heartbeat: %s", self.name, job.id, e)
            return True

    def _timed_out(self, run: _Run, timeout: float) -> None:
        run.ctx._cancel("the handler timed out")
        self._count("timed_out")
        stack = ""
        ident = run.thread.ident if run.thread is not None else None
        frame = sys._current_frames().get(ident) if ident is not None else None
        if frame is not None:
            stack = "the handler was at:\n" + "".join(traceback.format_stack(frame))
        self.log.warning("worker %s: job %d: handler timed out after %gs", self.name, run.job.id, timeout)
        self._fail(run, "handler timed out after %gs" % timeout, stack)

    def _record(self, run: _Run, out: _Outcome) -> None:
        job = run.job
        value: Any = out.exc if out.exc is not None else out.value
        if isinstance(value, Snooze):
            try:
                if self._call(job, "snooze", lambda: self.client.snooze(job.id, job.token or "", value.seconds),
                              run.lease_end, reraise=(SnoozeLimitError, InvalidInputError)) is not None:
                    self._count("snoozed")
            except (SnoozeLimitError, InvalidInputError) as e:
                self._fail(run, "could not snooze: %s" % e.message, out.stack)
            return
        if isinstance(value, Cancel):
            # Cancel takes no token: check first that the claim is still
            # ours, which also keeps anyone else from taking the job.
            if not self._beat(run):
                return
            if self._call(job, "cancel", lambda: self.client.cancel_job(job.id), run.lease_end) is not None:
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
        try:
            done = self._call(job, "complete", lambda: self.client.complete(job.id, job.token or "", value),
                              run.lease_end, reraise=(InvalidInputError, TooLargeError))
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
        if self._call(job, "fail", lambda: self.client.fail(job.id, job.token or "", message,
                                                            stack=stack or None, discard=discard),
                      run.lease_end) is not None:
            self._count("discarded" if discard else "failed")

    def _call(self, job: Job, what: str, fn: Callable[[], Any], lease_end: float,
              reraise: Tuple[Type[BaseException], ...] = ()) -> Any:
        """Calls fn, retrying what may pass (no connection, 429, 5xx) until
        the lease ends. Returns its answer, or None when it was refused
        (the claim is gone) or given up on; raises the errors in
        reraise."""
        deadline = max(lease_end, time.monotonic() + 1.0)
        backoff = 0.1
        while True:
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
                time.sleep(pause)
                backoff = min(backoff * 2, 2.0)

    def _count(self, what: str) -> None:
        with self._cond:
            self.counts[what] += 1

    # ---- stopping --------------------------------------------------------

    def _shutdown(self, signalled_again: Callable[[], bool]) -> None:
        """Waits for the running jobs until the stop deadline (a second
        signal ends the wait), releases those still running, and waits
        for their supervisors to record it."""
        with self._cond:
            if self._runs:
                self.log.info("worker %s: waiting for %d running job(s)", self.name, len(self._runs))
            while self._runs:
                deadline = self._stop_deadline if self._stop_deadline is not None else time.monotonic()
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, _POLL))
                if signalled_again():
                    self._stop_deadline = time.monotonic()
            for run in self._runs.values():
                run.release = True
                run.wake.set()
            supervisors = list(self._supervisors)
        for t in supervisors:
            t.join()
        self.log.info("worker %s: stopped", self.name)
