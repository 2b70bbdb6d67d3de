"""A graceful stop: a Worker process gets SIGTERM (or SIGINT) while jobs
run. It claims no more, lets the short jobs finish, releases the long ones
at its deadline, and exits; then every job is succeeded or pending again,
none is lost (left running) or run twice."""

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
from typing import Any, Callable, List

import support
from support import readpast, unique, wait_until


def setUpModule() -> None:
    support.server_url()


class WorkerProcess:
    """shutdown_worker.py running on a queue, its output collected."""

    def __init__(self, test: unittest.TestCase, queue: str, concurrency: int, shutdown_timeout: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(support.HERE, "shutdown_worker.py"), queue, str(concurrency),
             str(shutdown_timeout)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=support.HERE,
        )
        self.lines: List[str] = []
        self.errs: List[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.lines, str.strip), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.errs, str), daemon=True),
        ]
        for r in self.readers:
            r.start()
        test.addCleanup(self.close)

    @staticmethod
    def _read(f: Any, into: List[str], conv: Callable[[str], str]) -> None:
        for line in f:
            into.append(conv(line))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.join()
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()

    def join(self) -> None:
        for r in self.readers:
            r.join(5)

    def output(self) -> str:
        return "worker stdout:\n%s\nworker stderr:\n%s" % ("\n".join(self.lines), "".join(self.errs))

    def ids(self, word: str) -> List[int]:
        """The job ids of the "start ID" or "end ID" lines."""
        return sorted(int(x.split()[1]) for x in list(self.lines) if x.startswith(word + " "))


class ShutdownTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = support.client()
        self.queue = unique("stop")

    def enqueue(self) -> List[readpast.Job]:
        """2 jobs of 1 s, 2 of 2 minutes, then 3 that no first worker of
        concurrency 4 takes: they are claimed after the others (a lower
        priority runs first), and its slots are full until it stops."""
        specs = [readpast.JobSpec("sleep", {"seconds": s}, queue=self.queue) for s in (1.0, 1.0, 120, 120)]
        specs += [readpast.JobSpec("sleep", {"seconds": 0}, queue=self.queue, priority=10) for _ in range(3)]
        return self.c.enqueue_many(specs)

    def start(self, shutdown_timeout: float, jobs: List[int]) -> WorkerProcess:
        w = WorkerProcess(self, self.queue, 4, shutdown_timeout)
        try:
            wait_until(lambda: len(w.ids("start")) == 4, "the worker to start 4 jobs", 20)
        except AssertionError:
            self.fail("the worker did not start 4 jobs\n" + w.output())
        self.assertEqual(w.ids("start"), sorted(jobs))
        return w

    def stop(self, w: WorkerProcess, *sigs: int) -> float:
        """Sends the signals 0.3 s apart; returns how long the worker took
        to exit after the first."""
        signalled = time.monotonic()
        for i, sig in enumerate(sigs):
            if i:
                time.sleep(0.3)
            w.proc.send_signal(sig)
        try:
            code = w.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.fail("the worker did not exit within 30s of the signal\n" + w.output())
        took = time.monotonic() - signalled
        w.join()
        self.assertEqual(code, 0, w.output())
        self.assertIn("signal received; stopping", "".join(w.errs), w.output())
        return took

    def drain(self, jobs: List[readpast.Job], expect: List[int]) -> None:
        """Runs what is left with another worker: exactly the jobs expect,
        each once; then every job has succeeded."""
        ran: List[int] = []
        lock = threading.Lock()

        def quick(ctx: readpast.JobContext) -> Any:
            with lock:
                ran.append(ctx.id)
            return "second worker"

        w = readpast.Worker(self.c, [self.queue], {"sleep": quick}, concurrency=4, wait_seconds=2)
        t = w.start()
        try:
            wait_until(lambda: all(self.c.get_job(i).state == "succeeded" for i in expect),
                       "the second worker to run the jobs left", 20)
        finally:
            w.stop(timeout=5)
            t.join(30)
        self.assertEqual(sorted(ran), sorted(expect))
        states = {j.id: j.state for j in self.c.iter_jobs(queue=self.queue)}
        self.assertEqual(states, {j.id: "succeeded" for j in jobs})

    def test_sigterm_finishes_short_jobs_and_releases_long_ones(self) -> None:
        self.graceful(signal.SIGTERM)

    def test_sigint_too(self) -> None:
        self.graceful(signal.SIGINT)

    def graceful(self, sig: int) -> None:
        jobs = self.enqueue()
        short, long, waiting = [j.id for j in jobs[:2]], [j.id for j in jobs[2:4]], [j.id for j in jobs[4:]]
        w = self.start(2.5, short + long)
        took = self.stop(w, sig)
        # It waited for the short jobs, then until its deadline for the
        # long ones, not for them to end.
        self.assertGreaterEqual(took, 2.0, w.output())
        self.assertLess(took, 10, w.output())
        self.assertEqual(w.ids("start"), sorted(short + long), w.output())
        self.assertEqual(w.ids("end"), sorted(short), w.output())
        self.assertEqual("".join(w.errs).count("still running at the shutdown deadline; releasing it"), 2,
                         w.output())

        now = dt.datetime.now(dt.timezone.utc)
        for i in short:
            j = self.c.get_job(i)
            self.assertEqual((j.state, j.attempt, j.result), ("succeeded", 1, {"slept": 1.0}), w.output())
        for i in long:
            j = self.c.get_job(i)
            # Released: pending again at once, the attempt not counted.
            self.assertEqual((j.state, j.attempt, j.errors), ("pending", 0, []), w.output())
            self.assertLessEqual(j.run_at, now)
        for i in waiting:
            j = self.c.get_job(i)
            self.assertEqual((j.state, j.attempt), ("pending", 0), w.output())
        self.drain(jobs, long + waiting)

    def test_a_second_signal_releases_at_once(self) -> None:
        jobs = self.enqueue()
        started = [j.id for j in jobs[:4]]
        w = self.start(60, started)
        took = self.stop(w, signal.SIGTERM, signal.SIGTERM)
        self.assertLess(took, 10, w.output())  # not the 60 s of its shutdown timeout
        left = []
        for i in started:
            j = self.c.get_job(i)
            # Finished (a short job may end before the second signal), or
            # released; never left running.
            if j.state == "succeeded":
                self.assertIn(i, w.ids("end"), w.output())
            else:
                self.assertEqual((j.state, j.attempt), ("pending", 0), w.output())
                left.append(i)
        self.assertGreaterEqual(len(left), 2, w.output())  # the long ones at least
        self.drain(jobs, left + [j.id for j in jobs[4:]])


if __name__ == "__main__":
    unittest.main()
