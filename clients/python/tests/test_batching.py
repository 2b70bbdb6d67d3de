"""Completions sent together (Client.complete_many and the worker's
batches) and the connections the client keeps for reuse."""

import os
import socket
import threading
import unittest
import urllib.request
from typing import Any, List, Optional

from support import client, server_url, unique, wait_until

import readpast
from readpast import _completer, _http


def setUpModule() -> None:
    server_url()  # skip (or, under CI=true, fail) without a server


def request_count(route: str) -> float:
    """The server's count of answered requests on route (GET /metrics)."""
    req = urllib.request.Request(server_url() + "/metrics",
                                 headers={"Authorization": "Bearer " + os.environ.get("READPAST_TOKEN", "")})
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("readpast_http_requests_total{") and 'route="%s"' % route in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


class CompleteManyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.addCleanup(self.c.close)
        self.queue = unique("many")

    def test_each_item_alone(self) -> None:
        self.c.enqueue_many([readpast.JobSpec("k", {"i": i}, queue=self.queue) for i in range(3)])
        jobs = self.c.claim("w", [self.queue], limit=3, lease_seconds=60)
        self.assertEqual(len(jobs), 3)
        out = self.c.complete_many([
            (jobs[0].id, jobs[0].token or "", {"n": 0}),
            (jobs[1].id, "0" * 32, None),
            (jobs[2].id, jobs[2].token or "", None),
            (999999999, "0" * 32, None),
        ])
        self.assertIsNone(out[0])
        self.assertIsInstance(out[1], readpast.StaleClaimError)
        self.assertIsNone(out[2])
        self.assertIsInstance(out[3], readpast.NotFoundError)
        self.assertEqual(self.c.get_job(jobs[0].id).result, {"n": 0})
        self.assertEqual(self.c.get_job(jobs[1].id).state, "running")  # the stale token changed nothing
        self.assertEqual(self.c.get_job(jobs[2].id).state, "succeeded")
        self.assertEqual(self.c.complete_many([]), [])

    def test_a_malformed_batch_is_refused_whole(self) -> None:
        self.c.enqueue("k", None, queue=self.queue)
        job = self.c.claim("w", [self.queue], lease_seconds=60)[0]
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.complete_many([(job.id, job.token or "", None), (job.id, "", None)])
        self.assertEqual(cm.exception.field, "jobs[1].token")
        self.assertEqual(self.c.get_job(job.id).state, "running")


class WorkerBatchesTest(unittest.TestCase):
    def test_completions_go_in_batches(self) -> None:
        c = client()
        self.addCleanup(c.close)
        queue = unique("batches")
        n = 60
        jobs = c.enqueue_many([readpast.JobSpec("quick", {"i": i}, queue=queue) for i in range(n)])
        batch_before = request_count("POST /v1/jobs/complete")
        single_before = request_count("POST /v1/jobs/{id}/complete")
        release = threading.Event()

        def quick(ctx: readpast.JobContext) -> Any:
            release.wait(10)  # the first claim's jobs finish together
            return ctx.payload["i"]

        w = readpast.Worker(c, [queue], {"quick": quick}, concurrency=20, wait_seconds=1)
        t = w.start()
        wait_until(lambda: len(w.running_jobs()) == 20, "20 jobs running")
        release.set()

        def all_done() -> bool:
            return all(c.get_job(j.id).state == "succeeded" for j in jobs)

        wait_until(all_done, "every job to succeed", timeout=30)
        w.stop()
        t.join(30)
        self.assertEqual(w.counts["succeeded"], n)
        self.assertEqual([c.get_job(j.id).result for j in jobs], list(range(n)))
        batches = request_count("POST /v1/jobs/complete") - batch_before
        self.assertGreater(batches, 0)
        self.assertLess(batches, n)  # some went together
        self.assertEqual(request_count("POST /v1/jobs/{id}/complete") - single_before, 0)


class FakeClient:
    """complete_many as an older server answers it, or failing."""

    def __init__(self, exc: Optional[BaseException]) -> None:
        self.exc = exc
        self.calls = 0

    def complete_many(self, items: List[Any]) -> List[Any]:
        self.calls += 1
        if self.exc is not None:
            raise self.exc
        return [None for _ in items]


class CompleterTest(unittest.TestCase):
    def test_an_older_server_is_asked_once(self) -> None:
        fake = FakeClient(readpast.MethodNotAllowedError(405, "method_not_allowed", "no", None, None))
        comp = _completer.Completer(fake)  # type: ignore[arg-type]
        self.assertIs(comp.complete(1, "t", None), _completer.FALLBACK)
        self.assertIs(comp.complete(2, "t", None), _completer.FALLBACK)
        self.assertEqual(fake.calls, 1)

    def test_a_failed_batch_falls_back_each_time(self) -> None:
        fake = FakeClient(readpast.TransportError("no connection"))
        comp = _completer.Completer(fake)  # type: ignore[arg-type]
        self.assertIs(comp.complete(1, "t", None), _completer.FALLBACK)
        self.assertIs(comp.complete(2, "t", None), _completer.FALLBACK)
        self.assertEqual(fake.calls, 2)

    def test_callers_share_batches(self) -> None:
        gate = threading.Event()
        sizes: List[int] = []

        class Slow(FakeClient):
            def complete_many(self, items: List[Any]) -> List[Any]:
                sizes.append(len(items))
                gate.wait(10)
                return [None for _ in items]

        comp = _completer.Completer(Slow(None))  # type: ignore[arg-type]
        results: List[Any] = []
        first = threading.Thread(target=lambda: results.append(comp.complete(0, "t", None)))
        first.start()
        wait_until(lambda: sizes, "the first batch to be sent")
        rest = [threading.Thread(target=lambda i=i: results.append(comp.complete(i, "t", None)))
                for i in range(1, 11)]
        for t in rest:
            t.start()
        wait_until(lambda: len(comp._queue) == 10, "ten completions to wait")
        gate.set()
        for t in [first] + rest:
            t.join(10)
        self.assertEqual(results, [None] * 11)
        self.assertEqual(sizes, [1, 10])


class ConnectionsTest(unittest.TestCase):
    def test_one_connection_serves_calls_in_turn(self) -> None:
        c = client()
        self.addCleanup(c.close)
        for _ in range(20):
            c.stats()
        self.assertEqual(len(c._pool._idle), 1)
        conn = c._pool._idle[0]
        c.stats()
        self.assertIs(c._pool._idle[0], conn)  # reused
        c.close()
        self.assertEqual(c._pool._idle, [])
        c.stats()  # usable after close

    def test_a_connection_the_server_closed_is_not_used(self) -> None:
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.assertFalse(_http._readable(a))
        b.close()
        self.assertTrue(_http._readable(a))


if __name__ == "__main__":
    unittest.main()
