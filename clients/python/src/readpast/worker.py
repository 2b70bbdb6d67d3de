"""A worker that runs readpast jobs with Python handlers: :class:`Worker`."""

from __future__ import annotations

import logging
import os
import queue
import random
import signal
import socket
import threading
import time
import traceback
from typing import Any, Callable, ContextManager, Dict, List, Mapping, Optional, Sequence, Tuple

from ._outcomes import _Outcome, _Run, _Session
from ._stopping import _POLL, _Stopping
from .client import Client
from .errors import (
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    ReadpastError,
    TooManyAttemptsError,
    UnauthorizedError,
)
from .handler import Handler, JobContext
from .models import Job

__all__ = ["Worker"]

log = logging.getLogger("readpast.worker")

# The pause after a claim that found nothing, when claims do not wait
# (wait_seconds=0).
_IDLE_POLL = 1.0

# How soon a heartbeat that got no answer is tried again.
_BEAT_RETRY = 0.5

# How long a busy worker waits for more free slots before it claims
# (see _claim_min).
_GATHER = 0.005

# The pauses between claims after failed ones double from the first to the
# longest, each drawn from the upper half of its range: workers come back
# within about a second of a server or database that was away, spread out.
_CLAIM_BACKOFF_MIN = 0.05
_CLAIM_BACKOFF_MAX = 0.8


class Worker(_Stopping):
    """Runs jobs of ``queues`` with ``handlers`` (a mapping of job kind to
    :data:`Handler`), up to ``concurrency`` at once, each in a thread
    (threads are reused from job to job).

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

    ``on_process``, when given, is called with each claimed job before its
    handler runs and returns a context manager that wraps the handler, in
    the handler's thread: the place for a tracing span that continues the
    job's trace (``job.traceparent``; see the README's "Tracing"). An
    exception the handler raises (a raised :class:`Snooze`,
    :class:`Cancel` or :class:`Discard` included) passes through it, and
    one it raises itself fails the attempt as a handler's would.

    With ``parent_results``, the worker's claims ask for the results of
    each job's parents: a handler of a job that runs after others (a job
    of a flow) reads them as ``ctx.job.parent_results``, by the parents'
    refs in the flow (None for a parent that has not succeeded, or stored
    no result). Without it the claims read nothing more and
    ``parent_results`` is None.

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
        on_process: Optional[Callable[[Job], ContextManager[Any]]] = None,
        parent_results: bool = False,
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
        if on_process is not None and not callable(on_process):
            raise TypeError("on_process must be a callable taking a Job and returning a context manager")
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
        self.on_process = on_process
        self.parent_results = bool(parent_results)
        self._handlers: Dict[str, Handler] = {}
        self._timeouts: Dict[str, Optional[float]] = {}
        for kind, fn in (handlers or {}).items():
            self.register(kind, fn)

        self._cond = threading.Condition()
        self._runs: Dict[int, _Run] = {}  # by job id; guarded by _cond
        self._idle = 0  # handler threads waiting for a job; guarded by _cond
        self._threads = 0  # handler threads started; guarded by _cond
        self._claim_min = max(1, concurrency // 4)  # slots a claim waits _GATHER for
        self._work: "queue.SimpleQueue[Optional[_Run]]" = queue.SimpleQueue()
        self._watch = threading.Condition(self._cond)  # wakes the watcher
        self._watch_at = float("inf")  # when the watcher wakes next; guarded by _cond
        self._watching = False  # guarded by _cond
        self._stopping = threading.Event()
        self._stop_deadline: Optional[float] = None  # guarded by _cond
        self._stop_at: Optional[float] = None  # when the stop came; guarded by _cond
        self._session = _Session(client)  # the current run()'s
        self._signals = 0  # set by the signal handler, read by run()
        self._conn: Any = None  # the claim's connection while it waits; guarded by _conn_lock
        self._conn_owner: Optional[int] = None  # the claimer thread that set _conn; guarded by _conn_lock
        self._conn_lock = threading.Lock()
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
        token that is not valid), unless a stop came first."""
        self._begin()
        self._serve(install_signal_handlers)

    def _begin(self) -> None:
        with self._cond:
            if self._running:
                raise RuntimeError("this worker is running already: stop it and wait for run() to return "
                                   "(join the thread start() returned) before running it again")
            self._running = True

    def _serve(self, install_signal_handlers: bool) -> None:
        previous: Dict[int, Any] = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            self.log.info("worker %s: waiting for jobs on %s", self.name, ", ".join(self.queues))
            # This run's: what an earlier run gave up stays given up, and
            # what it left behind (a batch stuck, a release still
            # trickling) touches none of this run's.
            session = self._session = _Session(self.client)
            # The claimer takes this run's stop event now, not when its
            # thread gets to run: one held up past a give-up never claims
            # for the next run.
            claimer = threading.Thread(target=self._claim_loop, args=(session, self._stopping),
                                       name="readpast-claim", daemon=True)
            claimer.start()
            seen = 0
            while claimer.is_alive():
                if self._signals != seen:
                    seen = self._signals
                    self.log.info("worker %s: signal received; stopping", self.name)
                    self.stop(timeout=0 if seen > 1 else None)
                if self._stopping.is_set():
                    break  # the shutdown ends the claim, and does not wait for it to begin
                claimer.join(_POLL)
            self._shutdown(claimer, lambda: self._signals != seen)
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
            with self._cond:
                # Ready to run again, as the TypeScript Worker is: a stop
                # from now on applies to the next run.
                self._running = False
                self._stopping = threading.Event()
                self._stop_deadline = None
                self._stop_at = None
                self._signals = 0
                # This run's, taken with the flag: the next run, which may
                # begin once it is down, keeps its own.
                fatal, self._fatal = self._fatal, None
        if fatal is not None:
            raise fatal

    def start(self) -> threading.Thread:
        """Runs :meth:`run` in a background thread (no signal handlers) and
        returns it; :meth:`stop` it and join the thread. Raises
        RuntimeError, starting nothing, while a run has not returned."""
        self._begin()
        t = threading.Thread(target=self._serve, args=(False,), name="readpast-worker", daemon=True)
        try:
            t.start()
        except BaseException:
            with self._cond:
                self._running = False  # no run began: the next may
            raise
        return t

    def stop(self, timeout: Optional[float] = None) -> None:
        """Asks the worker to stop: no more claims, running jobs get
        ``timeout`` seconds (default ``shutdown_timeout``) to finish before
        they are released. Returns at once; calling it again can only
        shorten the wait. Do not call it from a signal handler: :meth:`run`
        installs its own."""
        self._stop(timeout)

    def _stop(self, timeout: Optional[float], error: Optional[BaseException] = None,
              run: Optional[threading.Event] = None) -> None:
        """stop(timeout); given run (a run's stop event), only while that
        run goes on, not stopped yet, and then with error as its error."""
        wait = self.shutdown_timeout if timeout is None else max(0.0, timeout)
        with self._cond:
            if run is not None:
                if run is not self._stopping or run.is_set():
                    return  # that run is over, or stopping: not the next one's
                self._fatal = error
            now = time.monotonic()
            deadline = now + wait
            if self._stop_deadline is None or deadline < self._stop_deadline:
                self._stop_deadline = deadline
            if self._stop_at is None:
                self._stop_at = now
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

    # ---- claiming --------------------------------------------------------

    def _claim_loop(self, session: _Session, stopping: threading.Event) -> None:
        try:
            self._claim_until_stopped(session, stopping)
        except BaseException as e:  # a bug: stop rather than hang with no claims
            self.log.exception("worker %s: claiming", self.name)
            self._stop(None, e, stopping)

    def _claim_until_stopped(self, session: _Session, stopping: threading.Event) -> None:
        # stopping is this run's: a claimer the shutdown gave up on never
        # claims for the next run.
        backoff = 0.0
        while not stopping.is_set():
            with self._cond:
                while len(self._runs) >= self.concurrency and not stopping.is_set():
                    self._cond.wait(_POLL * 5)
                # Busy: wait a moment for a quarter of the slots, so that one
                # claim takes several jobs instead of one claim per job.
                until = time.monotonic() + _GATHER
                while (self.concurrency - len(self._runs) < self._claim_min
                       and not stopping.is_set()):
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                free = self.concurrency - len(self._runs)
            if stopping.is_set():
                break
            started = time.monotonic()
            try:
                jobs, waited = self.client._claim(self.name, self.queues, free, self.lease_seconds,
                                                  self.wait_seconds, lambda conn: self._claim_conn(conn, stopping),
                                                  self.parent_results)
                backoff = 0.0
            except (InvalidInputError, UnauthorizedError, ForbiddenError, NotFoundError) as e:
                if stopping.is_set():
                    break  # stopped anyway: the claim's refusal changes nothing
                self.log.error("worker %s: claim refused: %s", self.name, e)
                self._stop(None, e, stopping)
                break
            except ReadpastError as e:
                if stopping.is_set():
                    break
                if self._signals:
                    # The signal handler shut the long poll's socket: run()
                    # stops the worker within _POLL.
                    stopping.wait(_POLL)
                    continue
                backoff = min(max(backoff * 2, _CLAIM_BACKOFF_MIN), _CLAIM_BACKOFF_MAX)
                pause = random.uniform(backoff / 2, backoff)
                if isinstance(e, TooManyAttemptsError) and e.retry_after:
                    pause = max(pause, e.retry_after)  # the server's throttle: wait as told
                self.log.warning("worker %s: claim: %s; trying again in %.2fs", self.name, e, pause)
                stopping.wait(pause)
                continue
            finally:
                self._claim_conn(None, stopping)
            if not jobs and self.wait_seconds == 0:
                stopping.wait(_IDLE_POLL)  # no long poll: do not spin
            # Never late: the server held the claim for waited seconds (a
            # long poll) before the claim that took the jobs began, and it
            # got the claim after it was sent; no longer than the wait asked
            # for, nor than the claim took. A release at shutdown has its
            # 5 s whatever this says.
            took = time.monotonic() - started
            lease_end = started + max(0.0, min(waited, self.wait_seconds, took)) + self.lease_seconds
            with self._cond:
                # Under the lock stop() sets the flag under: once the
                # shutdown began, no job starts.
                self.counts["claimed"] += len(jobs)
                if stopping.is_set():
                    unstarted, jobs = jobs, []
                else:
                    unstarted = []
                    for job in jobs:
                        self._start(job, lease_end, session)
            if unstarted:
                self._release_unstarted(unstarted, session)

    def _start(self, job: Job, lease_end: float, session: _Session) -> None:
        timeout = self._timeouts.get(job.kind) or self.handler_timeout
        now = time.monotonic()
        deadline = None if timeout is None else now + timeout
        ctx = JobContext(job, self.name, deadline)
        run = _Run(job, ctx, lease_end, timeout, now + self.heartbeat_interval, session)
        with self._cond:
            self._runs[job.id] = run
            first = min(run.next_beat, deadline if deadline is not None else run.next_beat)
            if first < self._watch_at:
                self._watch.notify()
            if not self._watching:
                self._watching = True
                threading.Thread(target=self._watch_loop, name="readpast-watch", daemon=True).start()
            if self._idle > 0:
                self._idle -= 1
                self._work.put(run)
                return
            self._threads += 1
            name = "readpast-handler-%d" % self._threads
        threading.Thread(target=self._handler_loop, args=(run,), name=name, daemon=True).start()

    # ---- one job ---------------------------------------------------------

    def _handler_loop(self, run: Optional[_Run]) -> None:
        """A handler thread: runs jobs one after the other until the worker
        stops. It frees a job's slot and becomes idle in one step, so that
        the job claimed into that slot reuses it."""
        while run is not None:
            owned = True
            try:
                owned = self._run(run)
            except Exception:  # a bug here must not lose the slot
                self.log.exception("worker %s: job %d", self.name, run.job.id)
            with self._cond:
                if owned and self._runs.get(run.job.id) is run:
                    del self._runs[run.job.id]
                self._idle += 1
                self._cond.notify_all()
            run = self._work.get()

    def _run(self, run: _Run) -> bool:
        """Runs one job's handler and records its outcome, unless the
        watcher or the shutdown decided the job's fate meanwhile (a
        timeout, a lost claim, a release): then the outcome is dropped.
        Returns whether it recorded the outcome (and so frees the slot)."""
        job = run.job
        run.thread_ident = threading.get_ident()
        handler = self._handlers.get(job.kind)
        if handler is None:
            if not run.decide():
                return False
            self._fail(run, "no handler registered for kind %r" % job.kind, "")
            return True
        if run.decided:
            return False  # released at the shutdown deadline before it began
        try:
            if self.on_process is None:
                value = handler(run.ctx)
            else:
                with self.on_process(job):
                    value = handler(run.ctx)
            out = _Outcome(value=value)
        except BaseException as e:  # noqa: B902 - a handler's SystemExit fails its job too
            out = _Outcome(exc=e, stack=traceback.format_exc())
        if not run.decide():
            return False
        self._record(run, out)
        return True

    def _end(self, run: _Run) -> None:
        """Frees the job's slot."""
        with self._cond:
            if self._runs.get(run.job.id) is run:
                del self._runs[run.job.id]
            self._cond.notify_all()

    def _watch_loop(self) -> None:
        """The watcher: heartbeats the jobs whose handlers still run, and
        times out those past their deadline, each call in a thread of its
        own, so that a job that ends before its first heartbeat costs no
        thread here."""
        while True:
            due: List[Tuple[_Run, bool]] = []  # (run, timed out)
            with self._cond:
                if not self._watching:
                    return
                now = time.monotonic()
                nxt = now + _POLL * 10
                for run in self._runs.values():
                    if run.ctx.deadline is not None and now >= run.ctx.deadline:
                        if not run.decided:
                            due.append((run, True))
                        continue
                    if run.ctx.deadline is not None:
                        nxt = min(nxt, run.ctx.deadline)
                    if run.beating:
                        continue
                    if now >= run.next_beat:
                        run.beating = True
                        due.append((run, False))
                    else:
                        nxt = min(nxt, run.next_beat)
                if not due:
                    self._watch_at = nxt
                    self._watch.wait(max(nxt - now, 0.0))
                    self._watch_at = float("inf")
                    continue
            for run, timed_out in due:
                if timed_out:
                    if run.decide():
                        threading.Thread(target=self._time_out, args=(run,), name="readpast-timeout",
                                         daemon=True).start()
                else:
                    threading.Thread(target=self._heartbeat, args=(run,), name="readpast-heartbeat",
                                     daemon=True).start()

    def _heartbeat(self, run: _Run) -> None:
        started = time.monotonic()
        renewed = run.lease_end
        try:
            # The claim is gone: its outcome is dropped, unless the handler
            # has decided it first, whose outcome then meets the stale token
            # (and counts the loss) instead.
            code = None if run.decided else self._renew(run)
            if code is not None and run.decide():
                self._lost(run, code)
                self._end(run)
        finally:
            with self._cond:
                run.beating = False
                if run.lease_end != renewed:  # renewed: the next an interval after this one began
                    run.next_beat = started + self.heartbeat_interval
                else:  # no answer: again soon, while the lease lasts
                    run.next_beat = time.monotonic() + min(_BEAT_RETRY, self.heartbeat_interval)
                self._watch.notify()

    def _time_out(self, run: _Run) -> None:
        try:
            self._timed_out(run, run.timeout or 0.0)
        finally:
            self._end(run)
