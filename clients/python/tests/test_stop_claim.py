"""A worker stopped while the server answers its claim: the answer, jobs
claimed an instant before the stop, is already on its way. The worker must
still read it and release those jobs unrun; dropped, they would stay
running for no one until their lease ran out, an attempt spent (a job of
one attempt failed without ever running)."""

import logging
import os
import socket
import threading
import time
import unittest
import urllib.parse
from typing import List, Optional

import support
from support import readpast, unique, wait_until


def setUpModule() -> None:
    support.server_url()


class HoldingProxy:
    """A TCP proxy in front of the server that passes the client's bytes
    on at once (its half-close too) and, while holding, keeps the server's
    bytes until release()."""

    def __init__(self, target: str) -> None:
        parts = urllib.parse.urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.ln = socket.socket()
        self.ln.bind(("127.0.0.1", 0))
        self.ln.listen()
        self.url = "http://127.0.0.1:%d" % self.ln.getsockname()[1]
        self.cond = threading.Condition()
        self.holding = False
        self.hold_body = False  # while holding, pass an answer's headers on
        self.hold_eof = False  # keep the server's end from the client
        self.held: List[bytes] = []
        self.sent = 0  # bytes the client sent
        self.socks: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.ln.accept()
            except OSError:
                return
            s = socket.create_connection(self.target)
            with self.cond:
                self.socks += [c, s]
            threading.Thread(target=self._up, args=(c, s), daemon=True).start()
            threading.Thread(target=self._down, args=(s, c), daemon=True).start()

    def _up(self, c: socket.socket, s: socket.socket) -> None:
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    s.shutdown(socket.SHUT_WR)  # the client's half-close, passed on
                    return
                with self.cond:
                    self.sent += len(b)
                    self.cond.notify_all()
                s.sendall(b)
        except OSError:
            return

    def _down(self, s: socket.socket, c: socket.socket) -> None:
        try:
            while True:
                b = s.recv(65536)
                with self.cond:
                    if b and self.holding:
                        if self.hold_body and b"\r\n\r\n" in b:
                            head, _, b = b.partition(b"\r\n\r\n")
                            c.sendall(head + b"\r\n\r\n")
                        self.held.append(b)
                        self.cond.notify_all()
                        continue
                    while self.holding:  # the server is done: wait for release
                        self.cond.wait()
                if not b:
                    with self.cond:
                        while self.hold_eof:
                            self.cond.wait()
                    c.shutdown(socket.SHUT_WR)
                    return
                c.sendall(b)
        except OSError:
            return

    def hold(self) -> None:
        with self.cond:
            self.holding = True

    def release(self) -> None:
        """Sends what was held to the client, and stops holding."""
        with self.cond:
            # Only the claim's connection sends anything while held.
            for b in self.held:
                for sock in self.socks[::2]:
                    try:
                        sock.sendall(b)
                    except OSError:
                        pass
            self.held = []
            self.holding = False
            self.hold_eof = False
            self.cond.notify_all()

    def wait_held(self, timeout: float = 15.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.held, timeout):
                raise AssertionError("the server sent nothing")

    def close(self) -> None:
        self.ln.close()
        with self.cond:
            for sock in self.socks:
                sock.close()


class StopWhileTheClaimIsAnswered(unittest.TestCase):
    def test_jobs_of_an_answer_in_flight_are_released(self) -> None:
        direct = support.client()
        self.addCleanup(direct.close)
        proxy = HoldingProxy(support.server_url())
        self.addCleanup(proxy.close)
        via = readpast.Client(proxy.url, token=os.environ.get("READPAST_TOKEN"))
        self.addCleanup(via.close)
        queue = unique("stopclaim")
        ran: List[int] = []
        w = readpast.Worker(via, [queue], {"k": lambda ctx: ran.append(ctx.job.id)},
                            lease_seconds=60, wait_seconds=20, shutdown_timeout=5)
        t = w.start()
        self.addCleanup(lambda: (w.stop(0), t.join(10)))
        # The worker's long poll is at the server.
        with proxy.cond:
            proxy.cond.wait_for(lambda: proxy.sent > 0, 15)
        proxy.hold()
        job = direct.enqueue("k", queue=queue, max_attempts=1)
        wait_until(lambda: direct.get_job(job.id).state == "running", "the server to claim the job")
        proxy.wait_held()  # the answer with the job is on its way
        w.stop()
        proxy.release()
        t.join(15)
        self.assertFalse(t.is_alive(), "the worker did not stop")
        got: Optional[readpast.Job] = wait_until(
            lambda: (lambda j: j if j.state == "pending" else None)(direct.get_job(job.id)),
            "the job to be released", timeout=10)
        assert got is not None
        self.assertEqual((got.state, got.attempt), ("pending", 0))
        self.assertEqual(ran, [], "the job ran after the stop")
        self.assertEqual(w.counts["released"], 1)

    def test_a_stop_while_the_claim_waits_ends_it_at_once(self) -> None:
        proxy = HoldingProxy(support.server_url())
        self.addCleanup(proxy.close)
        via = readpast.Client(proxy.url, token=os.environ.get("READPAST_TOKEN"))
        self.addCleanup(via.close)
        w = readpast.Worker(via, [unique("idle")], {"k": lambda ctx: None}, wait_seconds=20)
        errors: List[BaseException] = []

        def run() -> None:
            try:
                w.run(install_signal_handlers=False)
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        with proxy.cond:
            proxy.cond.wait_for(lambda: proxy.sent > 0, 15)
        time.sleep(0.2)  # the server waits for a job
        with proxy.cond:
            proxy.hold_eof = True  # the server's close of the connection comes late
        began = time.monotonic()
        w.stop()
        t.join(15)
        self.assertFalse(t.is_alive(), "the worker did not stop")
        self.assertLess(time.monotonic() - began, 5, "the long poll held the stop up")
        self.assertEqual(errors, [])
        # The half-closed connection is not reused for the next call.
        via.enqueue("k", queue=unique("after"))
        proxy.release()

    def _stop_while_held(self, enqueue: bool) -> None:
        """Stops a worker whose claim's answer the proxy holds back and
        never lets go: all of it (the server answers the half-close at once
        with no jobs, and the client sees nothing), or all but its headers
        with a job claimed. run() must return within the bound on an
        answer after a stop, not wait for the request's timeout (its wait
        and 60 s)."""
        direct = support.client()
        self.addCleanup(direct.close)
        proxy = HoldingProxy(support.server_url())
        self.addCleanup(proxy.close)
        via = readpast.Client(proxy.url, token=os.environ.get("READPAST_TOKEN"), timeout=60)
        self.addCleanup(via.close)
        queue = unique("stall")
        quiet = logging.getLogger("readpast.test.stall")
        quiet.disabled = True
        w = readpast.Worker(via, [queue], {"k": lambda ctx: None}, wait_seconds=20, shutdown_timeout=0,
                            logger=quiet)
        t = w.start()
        self.addCleanup(lambda: (proxy.release(), t.join(10)))
        with proxy.cond:
            proxy.cond.wait_for(lambda: proxy.sent > 0, 15)
        time.sleep(0.2)  # the server waits for a job
        with proxy.cond:
            proxy.hold_body = enqueue
            proxy.hold_eof = True
        proxy.hold()
        if enqueue:
            job = direct.enqueue("k", queue=queue, max_attempts=1)
            wait_until(lambda: direct.get_job(job.id).state == "running", "the server to claim the job")
            proxy.wait_held()  # the headers are through, the body held
        began = time.monotonic()
        w.stop()
        t.join(20)
        self.assertFalse(t.is_alive(), "run() did not return within 20 s of the stop")
        self.assertLess(time.monotonic() - began, 10, "the stalled answer held the stop up")

    def test_a_stop_while_the_server_seems_silent_ends_within_the_bound(self) -> None:
        self._stop_while_held(enqueue=False)

    def test_a_stop_while_an_answer_stalls_after_its_headers_ends_within_the_bound(self) -> None:
        self._stop_while_held(enqueue=True)

    def test_releases_at_shutdown_give_up_within_a_few_seconds_when_the_server_is_silent(self) -> None:
        direct = support.client()
        self.addCleanup(direct.close)
        proxy = HoldingProxy(support.server_url())
        self.addCleanup(proxy.close)
        via = readpast.Client(proxy.url, token=os.environ.get("READPAST_TOKEN"))
        self.addCleanup(via.close)
        queue = unique("silent")
        quiet = logging.getLogger("readpast.test.silent")
        quiet.disabled = True
        w = readpast.Worker(via, [queue], {"k": lambda ctx: ctx.cancelled.wait(60)}, lease_seconds=60,
                            wait_seconds=20, shutdown_timeout=0, logger=quiet)
        t = w.start()
        self.addCleanup(lambda: (proxy.release(), t.join(10)))
        job = direct.enqueue("k", queue=queue)
        wait_until(lambda: direct.get_job(job.id).state == "running", "the job to run")
        proxy.hold()  # nothing the server sends reaches the worker
        began = time.monotonic()
        w.stop()
        t.join(25)
        self.assertFalse(t.is_alive(), "run() did not return within 25 s of the stop")
        self.assertLess(time.monotonic() - began, 15, "the release was tried until the lease's end")
        self.assertEqual(w.counts["released"], 0)

    def test_a_stopped_worker_runs_again(self) -> None:
        c = support.client()
        self.addCleanup(c.close)
        queue = unique("again")
        w = readpast.Worker(c, [queue], {"k": lambda ctx: {"run": ctx.job.id}}, wait_seconds=1)
        t = w.start()
        w.stop()
        t.join(15)
        self.assertFalse(t.is_alive(), "the worker did not stop")
        w.stop()  # between runs: applies to the next one
        t = w.start()
        t.join(15)
        self.assertFalse(t.is_alive(), "a stop between runs was lost")
        job = c.enqueue("k", queue=queue)
        t = w.start()
        self.addCleanup(lambda: (w.stop(0), t.join(10)))
        got = wait_until(lambda: (lambda j: j if j.state == "succeeded" else None)(c.get_job(job.id)),
                         "the second run to work the job")
        self.assertEqual(got.result, {"run": job.id})


class LostClaim(unittest.TestCase):
    def test_a_claim_lost_at_a_heartbeat_is_counted_once_and_its_outcome_dropped(self) -> None:
        c = support.client()
        self.addCleanup(c.close)
        queue = unique("lost")
        returned = threading.Event()

        def handler(ctx: readpast.JobContext) -> str:
            ctx.cancelled.wait(10)
            returned.set()
            return "partial"

        # The worker's report of the loss takes a while, long enough for a
        # handler woken by the loss to return meanwhile.
        class SlowLoss(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "claim lost" in record.getMessage():
                    time.sleep(0.5)

        log = logging.getLogger(unique("lostlog"))
        log.addHandler(SlowLoss())
        log.propagate = False
        w = readpast.Worker(c, [queue], {"k": handler}, lease_seconds=3, wait_seconds=1, logger=log)
        t = w.start()
        self.addCleanup(lambda: (w.stop(0), t.join(10)))
        job = c.enqueue("k", queue=queue)
        wait_until(lambda: c.get_job(job.id).state == "running", "the job to start")
        c.cancel_job(job.id)  # the claim is gone; the next heartbeat finds out
        self.assertTrue(returned.wait(15), "the handler was not cancelled")
        w.stop()
        t.join(15)
        self.assertEqual(w.counts["lost"], 1)
        self.assertEqual(w.counts["succeeded"], 0)
        self.assertEqual(c.get_job(job.id).state, "cancelled")


if __name__ == "__main__":
    unittest.main()
