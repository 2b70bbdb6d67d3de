"""The Worker against a real `readpast serve`: concurrency, outcomes,
retries with tracebacks, timeouts, heartbeats and lost claims."""

import threading
import time
import unittest
from typing import Any, Dict, List

import support
from support import readpast, unique, wait_until


def setUpModule() -> None:
    support.server_url()


class WorkerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = support.client()
        self.queue = unique("w")

    def start(self, handlers: Dict[str, Any], **kw: Any) -> readpast.Worker:
        kw.setdefault("wait_seconds", 5)
        w = readpast.Worker(self.c, [self.queue], handlers, name=unique("pyw"), **kw)
        t = w.start()

        def stop() -> None:
            w.stop(timeout=5)
            t.join(30)
            self.assertFalse(t.is_alive(), "the worker did not stop")

        self.addCleanup(stop)
        return w

    def finished(self, job_id: int, timeout: float = 15.0) -> readpast.Job:
        def check() -> Any:
            j = self.c.get_job(job_id)
            return j if j.state in ("succeeded", "failed", "cancelled") else None

        return wait_until(check, "job %d to finish" % job_id, timeout)

    def test_runs_jobs_concurrently(self) -> None:
        barrier = threading.Barrier(3, timeout=10)
        lock = threading.Lock()
        now_running: List[int] = [0, 0]  # running, most at once

        def together(ctx: readpast.JobContext) -> Any:
            with lock:
                now_running[0] += 1
                now_running[1] = max(now_running[1], now_running[0])
            try:
                barrier.wait()  # only passes with 3 jobs running at once
                time.sleep(0.1)
                return {"i": ctx.payload["i"], "thread": threading.current_thread().name}
            finally:
                with lock:
                    now_running[0] -= 1

        jobs = self.c.enqueue_many([readpast.JobSpec("together", {"i": i}, queue=self.queue, max_attempts=1)
                                    for i in range(6)])
        w = self.start({"together": together}, concurrency=3)
        done = [self.finished(j.id) for j in jobs]
        self.assertEqual([(j.state, j.result["i"]) for j in done], [("succeeded", i) for i in range(6)])
        # A thread per job running at once, reused from job to job.
        self.assertEqual(len(set(j.result["thread"] for j in done)), 3)
        self.assertEqual(now_running[1], 3)
        self.assertEqual(w.counts["succeeded"], 6)
        self.assertEqual(w.counts["claimed"], 6)

    def test_failures_are_retried_with_the_traceback(self) -> None:
        def flaky(ctx: readpast.JobContext) -> Any:
            if ctx.attempt == 1:
                raise ValueError("boom on attempt %d" % ctx.attempt)
            return {"ok": ctx.attempt}

        def broken(ctx: readpast.JobContext) -> Any:
            return {}["missing"]

        retried = self.c.enqueue("flaky", queue=self.queue, max_attempts=3)
        failed = self.c.enqueue("broken", queue=self.queue, max_attempts=1)
        unknown = self.c.enqueue("nobody-handles-this", queue=self.queue, max_attempts=1)
        self.start({"flaky": flaky, "broken": broken}, concurrency=2)

        j = self.finished(retried.id)
        self.assertEqual((j.state, j.attempt, j.result), ("succeeded", 2, {"ok": 2}))
        self.assertEqual(len(j.errors), 1)
        self.assertEqual(j.errors[0].message, "ValueError: boom on attempt 1")
        assert j.errors[0].stack is not None
        self.assertIn("Traceback (most recent call last)", j.errors[0].stack)
        self.assertIn("in flaky", j.errors[0].stack)

        j = self.finished(failed.id)
        self.assertEqual((j.state, j.attempt), ("failed", 1))
        self.assertEqual(j.errors[0].message, "KeyError: 'missing'")

        j = self.finished(unknown.id)
        self.assertEqual(j.state, "failed")
        self.assertEqual(j.errors[0].message, "no handler registered for kind 'nobody-handles-this'")

    def test_snooze_cancel_discard(self) -> None:
        def snooze_return(ctx: readpast.JobContext) -> Any:
            return readpast.Snooze(0.1) if ctx.job.snoozes == 0 else "awake"

        def snooze_raise(ctx: readpast.JobContext) -> Any:
            if ctx.job.snoozes < 2:
                raise readpast.Snooze(0.05)
            return "awake twice"

        def cancel_return(ctx: readpast.JobContext) -> Any:
            return readpast.Cancel("no longer needed")

        def cancel_raise(ctx: readpast.JobContext) -> Any:
            raise readpast.Cancel("the order was deleted")

        def discard(ctx: readpast.JobContext) -> Any:
            raise readpast.Discard("payload has no 'to'")

        handlers = {"sr": snooze_return, "sx": snooze_raise, "cr": cancel_return, "cx": cancel_raise,
                    "d": discard}
        ids = {k: self.c.enqueue(k, queue=self.queue, max_attempts=5).id for k in handlers}
        w = self.start(handlers, concurrency=5)

        j = self.finished(ids["sr"])
        self.assertEqual((j.state, j.result, j.snoozes, j.attempt, j.errors), ("succeeded", "awake", 1, 1, []))
        j = self.finished(ids["sx"])
        self.assertEqual((j.state, j.result, j.snoozes, j.attempt), ("succeeded", "awake twice", 2, 1))
        for k in ("cr", "cx"):
            j = self.finished(ids[k])
            self.assertEqual((j.state, j.attempt, j.errors), ("cancelled", 1, []))
        j = self.finished(ids["d"])
        self.assertEqual((j.state, j.attempt, j.max_attempts), ("failed", 1, 5))
        self.assertEqual(j.errors[0].message, "payload has no 'to'")
        wait_until(lambda: w.counts["snoozed"] == 3 and w.counts["cancelled"] == 2 and w.counts["discarded"] == 1,
                   "the worker's counts")

    def test_handler_timeout(self) -> None:
        seen: Dict[str, Any] = {}
        done = threading.Event()

        def stuck(ctx: readpast.JobContext) -> Any:
            seen["cancelled"] = ctx.cancelled.wait(10)
            seen["reason"] = ctx.cancel_reason
            done.set()
            return "too late"

        job = self.c.enqueue("stuck", queue=self.queue, max_attempts=1)
        w = readpast.Worker(self.c, [self.queue], name=unique("pyw"), wait_seconds=5)
        w.register("stuck", stuck, timeout=0.5)
        t = w.start()
        self.addCleanup(lambda: (w.stop(timeout=5), t.join(30)))
        started = time.monotonic()
        j = self.finished(job.id)
        self.assertLess(time.monotonic() - started, 8)
        self.assertEqual((j.state, j.result), ("failed", None))
        self.assertEqual(j.errors[0].message, "handler timed out after 0.5s")
        assert j.errors[0].stack is not None
        self.assertIn("the handler was at", j.errors[0].stack)
        self.assertIn("in stuck", j.errors[0].stack)
        self.assertTrue(done.wait(5))
        self.assertEqual(seen, {"cancelled": True, "reason": "the handler timed out"})
        self.assertEqual(self.c.get_job(job.id).state, "failed")  # its late return changed nothing
        self.assertEqual(w.counts["timed_out"], 1)

    def test_heartbeats_keep_a_job_longer_than_its_lease(self) -> None:
        def slow(ctx: readpast.JobContext) -> Any:
            time.sleep(5.0)  # two and a half leases, not looking at ctx
            return "slept"

        job = self.c.enqueue("slow", queue=self.queue, max_attempts=5)
        # heartbeats every third of a 2 s lease: one may come a second late
        # on a loaded machine; a worker that sent none would lose the job
        w = self.start({"slow": slow}, lease_seconds=2.0)
        j = self.finished(job.id, timeout=20.0)
        self.assertEqual((j.state, j.attempt, j.errors, j.result), ("succeeded", 1, [], "slept"))
        self.assertEqual(w.counts["lost"], 0)

    def test_a_lost_claim_cancels_the_handler_and_drops_its_outcome(self) -> None:
        started = threading.Event()
        seen: Dict[str, Any] = {}

        def long(ctx: readpast.JobContext) -> Any:
            started.set()
            seen["cancelled"] = ctx.cancelled.wait(10)
            seen["reason"] = ctx.cancel_reason
            return "finished anyway"

        job = self.c.enqueue("long", queue=self.queue)
        w = self.start({"long": long}, lease_seconds=0.6)
        self.assertTrue(started.wait(10))
        self.c.cancel_job(job.id)
        wait_until(lambda: "reason" in seen, "the handler to see its claim lost", 10)
        self.assertTrue(seen["cancelled"])
        self.assertIn("claim was lost", seen["reason"])
        wait_until(lambda: w.running_jobs() == [], "the worker to let the job go")
        j = self.c.get_job(job.id)
        self.assertEqual((j.state, j.result, j.errors), ("cancelled", None, []))

    def test_a_result_that_is_not_json_fails_the_attempt(self) -> None:
        job = self.c.enqueue("obj", queue=self.queue, max_attempts=1)
        self.start({"obj": lambda ctx: object()})
        j = self.finished(job.id)
        self.assertEqual(j.state, "failed")
        self.assertIn("not JSON", j.errors[0].message)

    def test_a_refused_claim_stops_run(self) -> None:
        w = readpast.Worker(self.c, ["not a queue"], {"x": lambda ctx: None}, wait_seconds=1)
        with self.assertRaises(readpast.InvalidInputError) as cm:
            w.run(install_signal_handlers=False)
        self.assertEqual(cm.exception.field, "queues")

    def test_bad_configuration(self) -> None:
        with self.assertRaises(ValueError):
            readpast.Worker(self.c, [], {})
        with self.assertRaises(TypeError):
            readpast.Worker(self.c, "default", {})
        with self.assertRaises(ValueError):
            readpast.Worker(self.c, ["q"], {}, concurrency=0)
        with self.assertRaises(ValueError):
            readpast.Worker(self.c, ["q"], {}, lease_seconds=1, heartbeat_interval=2)
        with self.assertRaises(TypeError):
            readpast.Worker(self.c, ["q"], {"k": "not callable"})  # type: ignore[dict-item]


if __name__ == "__main__":
    unittest.main()
