"""What a worker's stop leaves out: what a run gave up is never sent, by
it nor by the next run, and touches none of the next run's; releases at
shutdown get their 5 s, and outcomes their lease, however late in its
long poll the claim was answered, and no longer than the claim took
whatever the answer says it waited; a claim refused after the stop just
ends the run; a handler's Cancel on a claim gone stale cancels nothing.
The proxy of test_stop_bounds stands in front of the server."""

import inspect
import logging
import os
import threading
import time
import unittest
from typing import Any, List, Optional, Tuple

import support
from support import unique, wait_until
from test_stop_bounds import RuleProxy

import readpast


def setUpModule() -> None:
    support.server_url()


class Leftovers(unittest.TestCase):
    def setUp(self) -> None:
        self.direct = support.client()
        self.addCleanup(self.direct.close)
        self.queue = unique("left")
        self.quiet = logging.getLogger("readpast.test.leftovers")
        self.quiet.disabled = True

    def _via(self, rules: List[Tuple[str, str, Optional[int]]], timeout: float = 30.0) -> readpast.Client:
        self.proxy = RuleProxy(support.server_url(), rules)
        self.addCleanup(self.proxy.close)
        via = readpast.Client(self.proxy.url, token=os.environ.get("READPAST_TOKEN"), timeout=timeout)
        self.addCleanup(via.close)
        return via

    def _requests(self, text: str, since: float = 0.0) -> List[str]:
        with self.proxy.lock:
            return [s[2] for s in self.proxy.seen if text in s[1] and s[0] >= since]

    def _run(self, w: readpast.Worker) -> threading.Thread:
        t = w.start()
        self.addCleanup(lambda: (w.stop(0), t.join(15)))
        return t

    def _stop(self, w: readpast.Worker, t: threading.Thread) -> float:
        began = time.monotonic()
        w.stop()
        t.join(20)
        self.assertFalse(t.is_alive(), "run() had not returned 20 s after the stop")
        return time.monotonic() - began

    def test_completions_given_up_are_sent_neither_later_nor_by_the_next_run(self) -> None:
        # Job a's batch is never answered (its request times out 8 s on);
        # job b's completion waits behind it. Both are given up 5 s after
        # the stop.
        go, done = threading.Event(), threading.Event()

        def second(ctx: readpast.JobContext) -> Any:
            go.wait(30)
            done.set()
            return "B"

        via = self._via([("/jobs/complete", "stall", 1)], timeout=8)
        w = readpast.Worker(via, [self.queue], {"a": lambda ctx: "A", "b": second}, concurrency=2,
                            lease_seconds=60, wait_seconds=1, shutdown_timeout=0, logger=self.quiet)
        a = self.direct.enqueue("a", queue=self.queue)
        b = self.direct.enqueue("b", queue=self.queue)
        t = w.start()
        wait_until(lambda: self._requests("/jobs/complete"), "job a's batch")
        go.set()
        self.assertTrue(done.wait(5))
        time.sleep(0.5)  # job b's completion waits behind the batch
        took = self._stop(w, t)
        self.assertLess(took, 6.5)
        ended = time.monotonic()
        self._run(w)
        # Past the stuck batch's timeout, b's completion went out in a batch
        # of its own, and a's alone, with the next run's give-up.
        time.sleep(10.5 - took)
        self.assertEqual(self._requests("/complete", ended), [], "a completion given up was sent")
        self.assertEqual(self.direct.get_job(a.id).state, "running")
        self.assertEqual(self.direct.get_job(b.id).state, "running")
        self.assertEqual(w.counts["succeeded"], 0)

    def test_a_release_an_earlier_run_gave_up_does_not_end_the_next_runs_wait(self) -> None:
        # Run 1: its claim is answered after the stop, and the release of
        # its job trickles until given up.
        via = self._via([("/claim", "hold", 1), ("/release", "trickle_cut", 1)])
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: ctx.cancelled.wait(60)}, wait_seconds=5,
                            lease_seconds=30, shutdown_timeout=0, logger=self.quiet)
        first = self.direct.enqueue("k", queue=self.queue)
        t = w.start()
        wait_until(lambda: self.direct.get_job(first.id).state == "running", "run 1's claim to take its job")
        self.assertLess(self._stop(w, t), 6.5)
        # Run 2: the same, and its release is answered 503, Retry-After: 4.
        with self.proxy.lock:
            self.proxy.rules[:0] = [["/claim", "hold", 1], ["/release", "busy", 1]]
        job = self.direct.enqueue("k", queue=self.queue)
        t = self._run(w)
        wait_until(lambda: self.direct.get_job(job.id).state == "running", "run 2's claim to take its job")
        threading.Timer(0.3, self.proxy.cut.set).start()  # run 1's release ends
        took = self._stop(w, t)
        # Run 1's release, ending, was counted as run 2's: run() returned
        # 0.3 s after the stop, before its retry.
        self.assertGreater(took, 3.5, "run() did not wait for its own release's retry")
        self.assertEqual(self._requests("/release"), ["trickle_cut", "busy", "pass"])
        self.assertEqual(self.direct.get_job(job.id).state, "pending")

    def test_a_release_gets_its_5_s_when_the_claim_was_answered_late_in_its_poll(self) -> None:
        # The server answers 4 s into a 20 s poll, with a lease of 3 s: a
        # lease counted from when the poll began was over, and the release
        # was given up at its first 503.
        via = self._via([("/claim", "hold", 1), ("/release", "busy1", 1)])
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: "ran"}, wait_seconds=20, lease_seconds=3,
                            shutdown_timeout=0, logger=self.quiet)
        t = self._run(w)
        wait_until(lambda: self._requests("/claim"), "the long poll")
        time.sleep(4)
        job = self.direct.enqueue("k", queue=self.queue)
        wait_until(lambda: self.direct.get_job(job.id).state == "running", "the server to claim it")
        self._stop(w, t)
        self.assertEqual(self._requests("/release"), ["busy1", "pass"])
        self.assertEqual(w.counts["released"], 1)
        self.assertEqual(self.direct.get_job(job.id).state, "pending")

    def test_an_outcomes_retries_count_the_lease_from_the_claim_not_the_poll(self) -> None:
        # As above; the handler's completion is answered 503, Retry-After:
        # 1, in its batch and alone: 2 s of the lease are left for it. A
        # lease counted from the poll's start had ended: the completion was
        # given up at its first 503, and the job ran again (attempt 2) once
        # its lease ended.
        via = self._via([("/jobs/complete", "busy1", 1), ("/complete", "busy1", 1)])
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: "ran"}, wait_seconds=20, lease_seconds=3,
                            logger=self.quiet)
        self._run(w)
        wait_until(lambda: self._requests("/claim"), "the long poll")
        time.sleep(4)
        job = self.direct.enqueue("k", queue=self.queue)
        done = wait_until(lambda: self.direct.get_job(job.id).state == "succeeded" and self.direct.get_job(job.id),
                          "the retried completion", 2.5)
        self.assertEqual(done.attempt, 1)
        self.assertEqual(self._requests("/complete"), ["busy1", "busy1", "pass"])

    def test_a_waited_seconds_no_claim_could_have_waited_moves_no_lease(self) -> None:
        # The answer says the claim waited 1,000,000 s; it took a few
        # milliseconds. Every completion is answered 503, Retry-After: 1:
        # it is tried within the 1.5 s lease (the batch, then alone at once
        # and 1 s later) and given up, not retried for the 5 s poll that
        # never was.
        class Boasting(readpast.Client):
            def _claim(self, *args: Any, **kwargs: Any) -> Tuple[List[readpast.Job], float]:
                jobs, _ = super()._claim(*args, **kwargs)
                return jobs, 1e6

        self.proxy = RuleProxy(support.server_url(), [("/complete", "busy1", None)])
        self.addCleanup(self.proxy.close)
        via = Boasting(self.proxy.url, token=os.environ.get("READPAST_TOKEN"))
        self.addCleanup(via.close)
        job = self.direct.enqueue("k", queue=self.queue, max_attempts=1)  # not run again
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: "ran"}, wait_seconds=5, lease_seconds=1.5,
                            logger=self.quiet)
        self._run(w)
        wait_until(lambda: self._requests("/complete"), "the completion")
        time.sleep(4)
        self.assertEqual(self._requests("/complete"), ["busy1"] * 3)
        self.assertNotEqual(self.direct.get_job(job.id).state, "succeeded")

    def test_a_start_before_the_last_run_returned_is_refused_in_the_caller(self) -> None:
        # start(); stop(); start() without a join: the second run raised in
        # its own thread, unseen, and nothing ran.
        w = readpast.Worker(self.direct, [self.queue], {"k": lambda ctx: "ran"}, wait_seconds=1,
                            logger=self.quiet)
        t = w.start()
        with self.assertRaisesRegex(RuntimeError, "running already"):
            w.start()
        w.stop()
        with self.assertRaisesRegex(RuntimeError, "running already"):
            w.start()
        t.join(15)
        self.assertFalse(t.is_alive())
        # A thread that cannot start leaves the worker as it was.
        real = threading.Thread.start

        def refused(thread: threading.Thread) -> None:
            if thread.name == "readpast-worker":
                raise RuntimeError("can't start new thread")
            real(thread)

        threading.Thread.start = refused  # type: ignore[method-assign]
        try:
            with self.assertRaisesRegex(RuntimeError, "can't start new thread"):
                w.start()
        finally:
            threading.Thread.start = real  # type: ignore[method-assign]
        t = self._run(w)
        job = self.direct.enqueue("k", queue=self.queue)
        wait_until(lambda: self.direct.get_job(job.id).state == "succeeded", "the next run to run the job")
        self._stop(w, t)

    def test_a_run_that_ended_never_takes_the_next_runs_error(self) -> None:
        # Run 1, stopped cleanly, is held on its way out once the worker
        # may run again; run 2's claim is refused (401), and run 2 is held
        # at the same place. Run 1 took run 2's error and raised it, and
        # run 2 returned as if stopped.
        lines, first = inspect.getsourcelines(readpast.Worker._serve)
        ready = next(i for i, line in enumerate(lines) if line.strip() == "self._signals = 0")
        out = next(first + i for i, line in enumerate(lines)
                   if i > ready and line.startswith(" " * 8) and not line.startswith(" " * 9))
        code = readpast.Worker._serve.__code__
        held = {"readpast-worker": (threading.Event(), threading.Event()), "run2": (threading.Event(), threading.Event())}

        def trace(frame: Any, event: str, arg: Any) -> Any:
            if frame.f_code is not code:
                return None

            def line(frame: Any, event: str, arg: Any) -> Any:
                h = held.get(threading.current_thread().name)
                if event == "line" and frame.f_lineno == out and h:
                    h[0].set()
                    h[1].wait(30)
                return line
            return line

        raised: List[BaseException] = []
        hook = threading.excepthook
        threading.excepthook = lambda a: raised.append(a.exc_value)  # type: ignore[assignment,misc]
        self.addCleanup(setattr, threading, "excepthook", hook)
        refused = readpast.Client(support.server_url(), token="c" * 64)
        self.addCleanup(refused.close)
        w = readpast.Worker(self.direct, [self.queue], {"k": lambda ctx: None}, wait_seconds=1, logger=self.quiet)
        got: List[Any] = []

        def second() -> None:
            try:
                w.run(install_signal_handlers=False)
                got.append("returned")
            except BaseException as e:  # noqa: B902
                got.append(e)

        threading.settrace(trace)
        try:
            t1 = w.start()
            time.sleep(0.3)
            w.stop(0)
            self.assertTrue(held["readpast-worker"][0].wait(15), "run 1 never got to its way out")
            w.client = refused
            t2 = threading.Thread(target=second, name="run2", daemon=True)
            t2.start()
        finally:
            threading.settrace(None)  # type: ignore[arg-type]
        self.assertTrue(held["run2"][0].wait(15), "run 2 never got to its way out")
        held["readpast-worker"][1].set()
        t1.join(10)
        held["run2"][1].set()
        t2.join(10)
        self.assertEqual(raised, [], "run 1, stopped cleanly, raised")
        self.assertEqual(len(got), 1)
        self.assertIsInstance(got[0], readpast.UnauthorizedError, "run 2 did not raise its refusal")

    def test_a_claim_refused_after_the_stop_ends_the_run(self) -> None:
        via = self._via([("/claim", "refuse", 1)])
        w = readpast.Worker(via, [self.queue], {"k": lambda ctx: None}, wait_seconds=20, logger=self.quiet)
        raised: List[BaseException] = []

        def run() -> None:
            try:
                w.run(install_signal_handlers=False)
            except BaseException as e:  # noqa: B902
                raised.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        wait_until(lambda: self._requests("/claim"), "the long poll")
        self.assertLess(self._stop(w, t), 2.0)
        self.assertEqual(raised, [], "run() raised the refusal of a claim answered after the stop")

    def test_a_handlers_cancel_on_a_stale_claim_cancels_nothing(self) -> None:
        # Worker 1's heartbeats get no answer but 503s: its lease of 1 s
        # ends, the job is rescued and runs under worker 2, and then
        # worker 1's handler returns Cancel.
        rescued = threading.Event()
        finish = threading.Event()

        def first(ctx: readpast.JobContext) -> Any:
            rescued.wait(20)
            return readpast.Cancel("changed my mind")

        def second(ctx: readpast.JobContext) -> Any:
            rescued.set()
            finish.wait(20)
            return "done"

        via = self._via([("/heartbeat", "busy", None)])
        w1 = readpast.Worker(via, [self.queue], {"k": first}, lease_seconds=1, wait_seconds=1,
                             logger=self.quiet)
        w2 = readpast.Worker(self.direct, [self.queue], {"k": second}, lease_seconds=30, wait_seconds=1,
                             logger=self.quiet)
        job = self.direct.enqueue("k", queue=self.queue)
        self._run(w1)
        wait_until(lambda: job.id in w1.running_jobs(), "worker 1 to run it")
        self._run(w2)
        self.assertTrue(rescued.wait(20), "worker 2 never ran the job")
        wait_until(lambda: w1.counts["lost"] + w1.counts["cancelled"], "worker 1's cancel to be answered")
        self.assertEqual(w1.counts["cancelled"], 0, "a stale claim cancelled the job")
        self.assertEqual(w1.counts["lost"], 1)
        self.assertEqual(self._requests("/cancel"), ["pass"])
        self.assertEqual(self.direct.get_job(job.id).state, "running")
        finish.set()
        wait_until(lambda: self.direct.get_job(job.id).state == "succeeded", "worker 2 to complete it")


if __name__ == "__main__":
    unittest.main()
