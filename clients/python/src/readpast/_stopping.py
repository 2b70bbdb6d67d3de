"""How a :class:`readpast.Worker` stops (``_Stopping``, a part of the
Worker): the claim's long poll ended, running jobs waited for until the
stop deadline and released past it, the jobs of a claim answered after
the stop released unrun, and every wait bounded, so that ``run()``
returns within a known time whatever the server does."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from types import FrameType
from typing import Any, Callable, Dict, List, Optional

from ._outcomes import _Outcomes, _Run, _Session
from ._transport import CONNECT_TIMEOUT
from .models import Job

# How often the waiting threads look at the stop flag a signal sets.
_POLL = 0.1

# How long a claim's answer may take to end once a stop half-closed its
# connection: an answer the server sent before it saw the client go has
# come by then. Past it the connection is shut for reading too, and the
# answer's jobs, if any were on their way, run again when their lease
# ends.
_HALF_CLOSED = 3.0

# How long a release at shutdown is tried, its retries included: past it,
# the job runs again when its lease ends.
_RELEASE_WAIT = 5.0

# How long past the stop deadline run() waits for the outcomes still
# being sent (completions, failures, ...), as the Go client's Stop does:
# past it, they are given up, and their jobs run again when their leases
# end.
_OUTCOME_GRACE = 5.0


class _Stopping(_Outcomes):
    """The Worker's stop: see :meth:`readpast.Worker.stop` and the README's
    "Graceful stop"."""

    _runs: Dict[int, _Run]
    _stopping: threading.Event
    _stop_deadline: Optional[float]
    _stop_at: Optional[float]
    _signals: int
    _session: _Session
    _conn: Any
    _conn_owner: Optional[int]
    _conn_lock: threading.Lock
    _watching: bool
    _watch: threading.Condition
    _idle: int
    _work: Any
    _end: Callable[[_Run], None]  # the Worker's: frees the job's slot

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        # Only a counter: a signal handler must not take locks the main
        # thread may hold. run() sees it within _POLL, and the claim's
        # socket is shut so that its long poll ends.
        self._signals += 1
        self._abort_claim(blocking=False)

    def _abort_claim(self, blocking: bool = True) -> None:
        """Ends the claim's long poll by closing the sending side of its
        socket: the server sees the client go, claims nothing more for it,
        and releases what it claimed but had not answered yet. The socket
        stays open for reading, so that an answer the server had already
        sent (jobs claimed an instant before) still arrives, and its jobs
        are released unrun (_release_unstarted); shut for reading too, the
        answer would be dropped and its jobs left running for no one until
        their lease ran out. The answer may take _HALF_CLOSED to end; then
        _cut_claim shuts the socket for reading too, so that neither a
        server nor a middlebox that stalls keeps the stop waiting for the
        request's timeout. A TLS socket cannot be half-closed, and is shut
        both ways. Only while the claim's request runs: once its answer is
        read the transport lets go of the connection. A connection still
        opening is left to its connect timeout (5 s); the shutdown calls
        this again until the claim has ended. The signal handler passes
        blocking=False: it must not wait for a lock its own thread
        holds."""
        if not self._conn_lock.acquire(blocking):
            return  # run() stops the worker, and aborts, within _POLL
        try:
            conn = self._conn
            sock = getattr(conn, "sock", None)
            if sock is not None and not getattr(conn, "readpast_shut", False):
                how = socket.SHUT_RDWR if isinstance(sock, ssl.SSLSocket) else socket.SHUT_WR
                try:
                    sock.shutdown(how)
                except OSError:
                    pass
                # Never back into the pool: the server answers a client it
                # saw go without saying it closes (Transport._request).
                conn.readpast_shut = True
                if how == socket.SHUT_WR:
                    cut = threading.Timer(_HALF_CLOSED, self._cut_claim, (conn,))
                    cut.daemon = True
                    cut.start()
        finally:
            self._conn_lock.release()

    def _cut_claim(self, conn: Any) -> None:
        """Shuts the claim's connection both ways if its answer has not
        ended _HALF_CLOSED after the stop half-closed it: the claim then
        fails at once, instead of waiting for its timeout."""
        with self._conn_lock:
            sock = getattr(conn, "sock", None)
            if self._conn is not conn or sock is None:
                return
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _claim_conn(self, conn: Any, stopping: threading.Event) -> None:
        """The claim's hook: conn is the connection of this thread's claim
        (given again once it is open), or None once the claim let go of
        it, which clears only this thread's. A claim whose run has stopped
        by the time its connection opens (a slow name lookup outlasted
        the shutdown's wait for it) is shut before it is sent: a claimer
        given up on never claims."""
        with self._conn_lock:
            me = threading.get_ident()
            if conn is None:
                if self._conn_owner == me:
                    self._conn, self._conn_owner = None, None
                return
            if not stopping.is_set():
                self._conn, self._conn_owner = conn, me
                return
            # Stopped (its run, or one given up on, whose successor's
            # connection it must not take the place of).
            sock = getattr(conn, "sock", None)
            if sock is not None and not getattr(conn, "readpast_shut", False):
                conn.readpast_shut = True
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # nothing sent yet: nothing to read back
                except OSError:
                    pass

    def _shutdown(self, claimer: threading.Thread, signalled_again: Callable[[], bool]) -> None:
        """Stops the worker once stop() (or a signal) came, whether or not
        the claim in flight has ended: waits for the running jobs until
        the stop deadline (a second signal ends the wait), releases those
        still running, all at once, and waits for the outcomes being sent
        until the stop deadline plus _OUTCOME_GRACE, for each release until
        _RELEASE_WAIT after it began, and for the claim until
        CONNECT_TIMEOUT and _HALF_CLOSED after the stop (the most a claim
        whose connection was opening then takes to be cut).
        What is still out then is given up: its jobs run again when their
        leases end."""
        session = self._session  # this run's: an earlier run's releases count for nothing here
        with self._cond:
            if self._runs:
                self.log.info("worker %s: waiting for %d running job(s)", self.name, len(self._runs))
        while True:
            if claimer.is_alive():
                self._abort_claim()  # again: a connection that was opening has opened
            with self._cond:
                deadline = self._stop_deadline if self._stop_deadline is not None else time.monotonic()
                left = deadline - time.monotonic()
                if not self._runs or left <= 0:
                    still = [run for run in self._runs.values() if run.decide()]
                    break
                self._cond.wait(min(left, _POLL))
                if signalled_again():
                    self._stop_deadline = time.monotonic()
        for run in still:
            threading.Thread(target=self._release_running, args=(run,), name="readpast-release",
                             daemon=True).start()
        while True:
            if claimer.is_alive():
                self._abort_claim()
            with self._cond:
                stopped = self._stop_at if self._stop_at is not None else time.monotonic()
                deadline = self._stop_deadline if self._stop_deadline is not None else stopped
                give_up = max(deadline + _OUTCOME_GRACE, session.release_until)
                if claimer.is_alive():  # opening its connection, then cut
                    give_up = max(give_up, stopped + CONNECT_TIMEOUT + _HALF_CLOSED)
                out = len(self._runs) + session.releasing
                if (out == 0 and not claimer.is_alive()) or time.monotonic() >= give_up:
                    break
                self._cond.wait(_POLL)
        with self._cond:
            if out or claimer.is_alive():
                session.gave_up.set()  # no more retries of what is still out
                self.log.error("worker %s: %d outcome(s) or release(s) still unsent at the shutdown's bound; "
                               "given up: their jobs run again when their leases end", self.name, out)
                self._runs.clear()
            self._watching = False
            self._watch.notify_all()
            for _ in range(self._idle):
                self._work.put(None)
            self._idle = 0
        self.log.info("worker %s: stopped", self.name)

    def _release_running(self, run: _Run) -> None:
        """Releases a job still running at the shutdown deadline: its
        handler's context is cancelled and its outcome dropped."""
        job = run.job
        try:
            run.ctx._cancel("the worker stopped and released the job")
            self.log.warning("worker %s: job %d still running at the shutdown deadline; releasing it",
                             self.name, job.id)
            if self._release(job, run.session):
                self._count("released")
        finally:
            self._end(run)

    def _release_unstarted(self, jobs: List[Job], session: _Session) -> None:
        """Releases the jobs of a claim answered after the stop, each in a
        thread of its own, all at once; the shutdown of session (the run
        that claimed them) waits for them."""
        with self._cond:
            session.releasing += len(jobs)
            # Now, before the claimer ends, not as each release begins:
            # the shutdown, once it sees the claimer gone, waits for these.
            session.release_until = max(session.release_until, time.monotonic() + _RELEASE_WAIT)
        for job in jobs:
            threading.Thread(target=self._release_one, args=(job, session), name="readpast-release",
                             daemon=True).start()

    def _release_one(self, job: Job, session: _Session) -> None:
        try:
            self.log.info("worker %s: job %d claimed while stopping; releasing it", self.name, job.id)
            if self._release(job, session):
                self._count("released")
        finally:
            with self._cond:
                session.releasing -= 1
                self._cond.notify_all()

    def _release(self, job: Job, session: _Session) -> bool:
        """Releases job at shutdown, for _RELEASE_WAIT at most in all: each
        try gets what is left of it; reports whether it was released. The
        full _RELEASE_WAIT whatever the worker makes of the lease: a
        release whose claim went stale meanwhile is refused and changes
        nothing, so trying costs nothing, while giving up early leaves the
        job running for no one until its lease ends."""
        until = time.monotonic() + _RELEASE_WAIT
        with self._cond:
            session.release_until = max(session.release_until, until)
        return self._call(session, job, "release", lambda: self.client.release(
            job.id, job.token or "", timeout=max(until - time.monotonic(), 0.05)), until, grace=0.0) is not None


__all__: List[str] = []
