"""The bounds of a worker's stop when the server misbehaves: releases at
shutdown go out all at once and each gives up within its 5 s, retries
included; outcomes still unsent 5 s past the stop deadline are given up;
and the stop deadline applies to running jobs while a claim stalls. A
proxy in front of the server stalls, trickles or holds the answers of
chosen requests."""

import logging
import os
import socket
import struct
import threading
import time
import unittest
import urllib.parse
from typing import Any, List, Optional, Tuple

import support
from support import unique, wait_until

import readpast


def setUpModule() -> None:
    support.server_url()


class RuleProxy:
    """A proxy in front of the server that reads each request and, by the
    first rule whose text its path contains (each rule for its first n
    requests, or all), passes it on ("pass", the client's half-close
    too), never answers it ("stall"), answers a status line and then a
    byte a second ("trickle"), or so until cut is set, then resets the
    connection ("trickle_cut"), answers 503 with Retry-After: 4 itself
    ("busy"), or 1 ("busy1"), passes it on and holds the answer until the
    client closes its sending side ("hold"), or answers 403 itself once
    the client closes its sending side ("refuse")."""

    def __init__(self, target: str, rules: List[Tuple[str, str, Optional[int]]]) -> None:
        parts = urllib.parse.urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.rules = [list(r) for r in rules]
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.cut = threading.Event()
        self.seen: List[Tuple[float, str, str]] = []  # (time, path, action)
        self.ln = socket.socket()
        self.ln.bind(("127.0.0.1", 0))
        self.ln.listen()
        self.url = "http://127.0.0.1:%d" % self.ln.getsockname()[1]
        self.socks: List[socket.socket] = [self.ln]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closed.set()
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass

    def _action(self, path: str) -> str:
        with self.lock:
            for rule in self.rules:
                if rule[0] in path:
                    if rule[2] is None:
                        act = str(rule[1])
                    elif rule[2] > 0:
                        rule[2] -= 1
                        act = str(rule[1])
                    else:
                        continue
                    break
            else:
                act = "pass"
            self.seen.append((time.monotonic(), path, act))
            return act

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.ln.accept()
            except OSError:
                return
            with self.lock:
                self.socks.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        r = c.makefile("rb")
        try:
            while True:
                head = _read_head(r)
                if head is None:
                    return
                body = r.read(_length(head))
                path = head.split(b" ", 2)[1].decode()
                act = self._action(path)
                if act == "stall":
                    self.closed.wait()
                    return
                if act == "trickle":
                    c.sendall(b"HTTP/1.1 200 OK\r\n")
                    while not self.closed.wait(1.0):
                        c.sendall(b"X")
                    return
                if act == "trickle_cut":
                    c.sendall(b"HTTP/1.1 200 OK\r\n")
                    while not self.cut.wait(0.5) and not self.closed.is_set():
                        c.sendall(b"X")
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                if act == "refuse":
                    while c.recv(1):  # until the client's half-close
                        pass
                    msg = b'{"error":{"code":"forbidden","message":"no"}}'
                    c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (len(msg), msg))
                    return
                if act in ("busy", "busy1"):
                    msg = b'{"error":{"code":"unavailable","message":"busy"}}'
                    c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %s\r\n"
                              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                              % (b"4" if act == "busy" else b"1", len(msg), msg))
                    continue
                up = socket.create_connection(self.target)
                with self.lock:
                    self.socks.append(up)
                up.sendall(head + body)
                if act == "pass":
                    threading.Thread(target=_pass_half_close, args=(c, up), daemon=True).start()
                ur = up.makefile("rb")
                answer = _read_head(ur) or b""
                answer += _read_body(ur, answer)
                up.close()
                if act == "hold":
                    while c.recv(1):  # until the client's half-close
                        pass
                c.sendall(answer)
                if act == "hold":
                    return
        except (OSError, ValueError):
            return
        finally:
            try:
                c.close()
            except OSError:
                pass


def _pass_half_close(c: socket.socket, up: socket.socket) -> None:
    """Passes the client's half-close on to the server, as a proxy does,
    unless the client sends its next request first."""
    try:
        if not c.recv(1, socket.MSG_PEEK):
            up.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _read_head(r) -> Optional[bytes]:  # type: ignore[no-untyped-def]
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = r.readline()
        if not line:
            return None
        head += line
    return head


def _read_body(r, head: bytes) -> bytes:  # type: ignore[no-untyped-def]
    """The body after head as sent: Content-Length bytes, or chunks."""
    if b"\r\ntransfer-encoding: chunked" not in head.lower():
        return r.read(_length(head))
    body = b""
    while True:
        line = r.readline()
        body += line
        n = int(line.strip().split(b";")[0], 16)
        body += r.read(n + 2)
        if n == 0:
            return body


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


class StopBounds(unittest.TestCase):
    def setUp(self) -> None:
        self.direct = support.client()
        self.addCleanup(self.direct.close)
        self.queue = unique("bounds")
        self.quiet = logging.getLogger("readpast.test.bounds")
        self.quiet.disabled = True

    def _via(self, rules: List[Tuple[str, str, Optional[int]]], timeout: float = 30.0) -> readpast.Client:
        proxy = RuleProxy(support.server_url(), rules)
        self.addCleanup(proxy.close)
        self.proxy = proxy
        via = readpast.Client(proxy.url, token=os.environ.get("READPAST_TOKEN"), timeout=timeout)
        self.addCleanup(via.close)
        return via

    def _stop_and_time(self, w: readpast.Worker, t: threading.Thread, timeout: Optional[float] = None,
                       cap: float = 30.0) -> float:
        began = time.monotonic()
        w.stop(timeout)
        t.join(cap)
        took = time.monotonic() - began
        self.assertFalse(t.is_alive(), "run() had not returned %.0f s after the stop" % cap)
        return took

    def test_a_claim_answered_after_the_stop_releases_its_jobs_all_at_once(self) -> None:
        # The server claims 4 jobs at once; the proxy delivers its answer
        # when the stop half-closes the claim, and stalls every release.
        for i in range(4):
            self.direct.enqueue("k", {"i": i}, queue=self.queue)
        via = self._via([("/claim", "hold", 1), ("/release", "stall", None)])
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: None}, concurrency=4, wait_seconds=20,
                            shutdown_timeout=0, logger=self.quiet)
        t = w.start()
        wait_until(lambda: len(self.direct.list_jobs(queue=self.queue, state="running").jobs) == 4,
                   "the server to claim the jobs")
        took = self._stop_and_time(w, t)
        # Released one after another, each given its 5 s, they took 20 s.
        self.assertLess(took, 8.5, "the releases of the answer's jobs went one after another")
        self.assertEqual(len([s for s in self.proxy.seen if "/release" in s[1]]), 4)

    def test_a_release_that_trickles_is_given_up_within_its_bound(self) -> None:
        job = self.direct.enqueue("k", queue=self.queue)
        via = self._via([("/release", "trickle", None)])
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: ctx.cancelled.wait(60)}, wait_seconds=1,
                            shutdown_timeout=0, logger=self.quiet)
        t = w.start()
        wait_until(lambda: job.id in w.running_jobs(), "the job to run")
        # A timeout of each read, not of the request: a byte a second held
        # the release, and run(), for as long as the server went on.
        took = self._stop_and_time(w, t, cap=20)
        self.assertLess(took, 8.5)

    def test_the_retries_of_a_release_share_its_bound(self) -> None:
        job = self.direct.enqueue("k", queue=self.queue)
        via = self._via([("/release", "busy", 1), ("/release", "stall", None)])
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: ctx.cancelled.wait(60)}, wait_seconds=1,
                            shutdown_timeout=0, logger=self.quiet)
        t = w.start()
        wait_until(lambda: job.id in w.running_jobs(), "the job to run")
        took = self._stop_and_time(w, t)
        # The retry, 4 s on, was given 5 s of its own: 9 s.
        self.assertLess(took, 7.5, "the retry after Retry-After was given a bound of its own")
        self.assertEqual(len([s for s in self.proxy.seen if "/release" in s[1]]), 2)

    def test_outcomes_still_unsent_past_the_grace_are_given_up(self) -> None:
        job = self.direct.enqueue("k", queue=self.queue)
        go = threading.Event()
        via = self._via([("/complete", "stall", None)], timeout=10)
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: go.wait(30) and "done"}, wait_seconds=1,
                            lease_seconds=10, shutdown_timeout=1, logger=self.quiet)
        t = w.start()
        wait_until(lambda: job.id in w.running_jobs(), "the job to run")
        threading.Timer(0.5, go.set).start()  # the handler ends before the stop deadline
        took = self._stop_and_time(w, t)
        # The batch's request timeout, then the job's own completion tried
        # again past its lease: 20.5 s.
        self.assertLess(took, 9.0, "run() waited for the completion's request timeouts")
        self.assertEqual(w.counts["succeeded"], 0)

    def test_a_stop_releases_running_jobs_at_its_deadline_while_a_claim_stalls(self) -> None:
        job = self.direct.enqueue("k", queue=self.queue)
        cancelled = threading.Event()
        stopped_at: List[float] = []

        def handler(ctx: readpast.JobContext) -> None:
            ctx.cancelled.wait(60)
            stopped_at.append(time.monotonic())
            cancelled.set()

        # The worker's second claim (its free slot's) is never answered,
        # whatever the client sends.
        via = self._via([("/claim", "pass", 1), ("/claim", "stall", None)])
        w = readpast.Worker(via, [self.queue], {"k": handler}, concurrency=2, wait_seconds=20,
                            shutdown_timeout=0, logger=self.quiet)
        t = w.start()
        wait_until(lambda: job.id in w.running_jobs(), "the job to run")
        wait_until(lambda: len([s for s in self.proxy.seen if "/claim" in s[1]]) >= 2, "the second claim")
        began = time.monotonic()
        self._stop_and_time(w, t)
        self.assertTrue(cancelled.wait(5))
        # The shutdown began once the claim had ended, 3 s on.
        self.assertLess(stopped_at[0] - began, 1.5, "stop(0) waited for the stalled claim to release the job")
        self.assertEqual(self.direct.get_job(job.id).state, "pending")


if __name__ == "__main__":
    unittest.main()


class RunAgainAfterAGiveUp(unittest.TestCase):
    """A worker run again after its shutdown gave up on what was still out:
    nothing of the first run acts in the second."""

    def setUp(self) -> None:
        self.direct = support.client()
        self.addCleanup(self.direct.close)
        self.queue = unique("again")
        self.quiet = logging.getLogger("readpast.test.again")
        self.quiet.disabled = True

    def _proxy(self, rules: List[Tuple[str, str, Optional[int]]]) -> RuleProxy:
        proxy = RuleProxy(support.server_url(), rules)
        self.addCleanup(proxy.close)
        return proxy

    def _run(self, w: readpast.Worker) -> threading.Thread:
        t = w.start()
        self.addCleanup(lambda: (w.stop(0), t.join(15)))
        return t

    def _requests(self, proxy: RuleProxy, text: str, since: float) -> int:
        with proxy.lock:
            return len([s for s in proxy.seen if text in s[1] and s[0] >= since])

    def test_a_claimer_given_up_on_never_claims_nor_takes_the_next_runs_connection(self) -> None:
        # The first claim's name lookup takes 10 s, past the shutdown's
        # wait for it (8 s): the claimer is given up on, and its claim is
        # sent, if ever, while the next run works.
        real = socket.getaddrinfo
        slow = [True]

        def lookup(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name == "readpast-claim" and slow[0]:
                slow[0] = False
                time.sleep(10)
            return real(*args, **kwargs)

        socket.getaddrinfo = lookup  # type: ignore[assignment]
        self.addCleanup(setattr, socket, "getaddrinfo", real)
        proxy = self._proxy([])
        via = readpast.Client(proxy.url.replace("127.0.0.1", "localhost"), token=os.environ.get("READPAST_TOKEN"))
        self.addCleanup(via.close)
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: None}, wait_seconds=10, shutdown_timeout=0,
                            logger=self.quiet)
        t = w.start()
        time.sleep(0.5)
        w.stop()
        t.join(15)
        self.assertFalse(t.is_alive())
        t = self._run(w)  # the first run's claimer still looks the name up
        wait_until(lambda: self._requests(proxy, "/claim", 0) >= 1, "the second run's claim")
        time.sleep(11.0 - 8.5)  # the first claimer's lookup has ended
        began = time.monotonic()
        w.stop()
        t.join(15)
        self.assertLess(time.monotonic() - began, 2.5, "the stop did not end the second run's claim")
        job = self.direct.enqueue("k", queue=self.queue)
        time.sleep(1.5)
        self.assertEqual(self.direct.get_job(job.id).state, "pending")
        # The first claimer sent its claim once its lookup ended, and its
        # long poll took the job (and released it, its run being over).
        self.assertEqual(self._requests(proxy, "/claim", 0), 1, "a claimer given up on sent a claim")
        self.assertEqual(self._requests(proxy, "/release", 0), 0, "a claimer given up on took a job")

    def test_a_batch_a_given_up_run_left_stuck_holds_up_none_of_the_next_runs_completions(self) -> None:
        first = self.direct.enqueue("k", queue=self.queue)
        proxy = self._proxy([("/jobs/complete", "stall", 1)])
        via = readpast.Client(proxy.url, token=os.environ.get("READPAST_TOKEN"))
        self.addCleanup(via.close)
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: None}, wait_seconds=1, shutdown_timeout=0,
                            logger=self.quiet)
        t = w.start()
        wait_until(lambda: self._requests(proxy, "/jobs/complete", 0) == 1, "the first run's batch")
        w.stop()
        t.join(15)
        self.assertFalse(t.is_alive())
        self._run(w)
        job = self.direct.enqueue("k", queue=self.queue)
        # Behind the first run's stuck batch, it waited for that request's
        # timeout (30 s).
        wait_until(lambda: self.direct.get_job(job.id).state == "succeeded", "the second run's job to complete", 5)
        self.assertEqual(self.direct.get_job(first.id).state, "running")

    def test_outcomes_given_up_are_not_tried_again_in_the_next_run(self) -> None:
        self.direct.enqueue("k", queue=self.queue)
        proxy = self._proxy([("/complete", "busy", None)])
        via = readpast.Client(proxy.url, token=os.environ.get("READPAST_TOKEN"))
        self.addCleanup(via.close)
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: None}, wait_seconds=1, lease_seconds=40,
                            shutdown_timeout=0, logger=self.quiet)
        t = w.start()
        wait_until(lambda: self._requests(proxy, "/complete", 0) >= 2, "the completion to be refused")
        w.stop()
        t.join(15)
        self.assertFalse(t.is_alive())
        ended = time.monotonic()
        self._run(w)
        time.sleep(6)
        # The next run cleared the first one's give-up, and its retries
        # went on every 4 s.
        self.assertEqual(self._requests(proxy, "/complete", ended), 0, "a given-up completion was tried again")
