"""Trace context: an enqueue's traceparent and tracestate reach the jobs
and come back with the claim, malformed ones are refused, and the
Worker's on_process hook wraps each handler with the job in hand."""

import threading
import unittest
from typing import Any, Dict, List, Optional

import support
from support import readpast, unique, wait_until

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACESTATE = "congo=t61rcWkgMzE"


def setUpModule() -> None:
    support.server_url()


class TraceContextTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = support.client()
        self.addCleanup(self.c.close)
        self.queue = unique("tr")

    def test_enqueue_and_claim_carry_the_context(self) -> None:
        one = self.c.enqueue("k", queue=self.queue, traceparent=TRACEPARENT, tracestate=TRACESTATE)
        self.assertEqual((one.traceparent, one.tracestate), (TRACEPARENT, TRACESTATE))
        many = self.c.enqueue_many([readpast.JobSpec(kind="k", queue=self.queue)] * 2, traceparent=TRACEPARENT)
        self.assertEqual([j.traceparent for j in many], [TRACEPARENT] * 2)
        self.assertEqual([j.tracestate for j in many], [None] * 2)
        plain = self.c.enqueue("k", queue=self.queue)
        self.assertIsNone(plain.traceparent)
        claimed = self.c.claim(unique("w"), [self.queue], limit=10, lease_seconds=60)
        got = {j.id: (j.traceparent, j.tracestate) for j in claimed}
        self.assertEqual(got, {
            one.id: (TRACEPARENT, TRACESTATE),
            many[0].id: (TRACEPARENT, None),
            many[1].id: (TRACEPARENT, None),
            plain.id: (None, None),
        })

    def test_bad_context_is_refused(self) -> None:
        with self.assertRaises(ValueError):
            readpast.trace_headers(tracestate="a=b")
        with self.assertRaises(TypeError):
            readpast.trace_headers(traceparent=b"00")  # type: ignore[arg-type]
        self.assertEqual(readpast.trace_headers(), {})
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.enqueue("k", queue=self.queue, traceparent="00-nope")
        self.assertEqual(cm.exception.field, "traceparent")
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.enqueue_many([{"kind": "k", "queue": self.queue}], traceparent=TRACEPARENT, tracestate="not valid")
        self.assertEqual(cm.exception.field, "tracestate")
        self.assertEqual(self.c.claim(unique("w"), [self.queue], limit=10, lease_seconds=60), [])


class OnProcessTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = support.client()
        self.addCleanup(self.c.close)
        self.queue = unique("trw")

    def test_hook_wraps_each_handler(self) -> None:
        events: List[Any] = []
        active = threading.local()
        lock = threading.Lock()

        class Span:
            def __init__(self, job: readpast.Job) -> None:
                self.job = job

            def __enter__(self) -> "Span":
                active.job = self.job
                with lock:
                    events.append(("enter", self.job.id, self.job.traceparent, threading.get_ident()))
                return self

            def __exit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
                active.job = None
                with lock:
                    events.append(("exit", self.job.id, typ.__name__ if typ else None))

        seen: Dict[int, Any] = {}

        def ok(ctx: readpast.JobContext) -> str:
            seen[ctx.job.id] = (getattr(active, "job", None), threading.get_ident())
            return "done"

        def boom(ctx: readpast.JobContext) -> None:
            raise RuntimeError("boom")

        w = readpast.Worker(self.c, [self.queue], {"ok": ok, "boom": boom}, name=unique("pyw"),
                            wait_seconds=2, on_process=Span)
        t = w.start()
        self.addCleanup(lambda: (w.stop(timeout=5), t.join(30)))
        a = self.c.enqueue("ok", queue=self.queue, traceparent=TRACEPARENT)
        b = self.c.enqueue("boom", queue=self.queue, max_attempts=1)
        wait_until(lambda: self.c.get_job(a.id).state == "succeeded" and self.c.get_job(b.id).state == "failed",
                   "both jobs to finish")
        with lock:
            got = list(events)
        self.assertIn(("exit", a.id, None), got)
        self.assertIn(("exit", b.id, "RuntimeError"), got)
        enters = {e[1]: e for e in got if e[0] == "enter"}
        self.assertEqual(enters[a.id][2], TRACEPARENT)
        self.assertIsNone(enters[b.id][2])
        job_in_hook, thread = seen[a.id]
        self.assertIsNotNone(job_in_hook)
        self.assertEqual(job_in_hook.id, a.id)
        self.assertEqual(thread, enters[a.id][3], "the hook ran in another thread than the handler")

    def test_hook_must_be_callable(self) -> None:
        with self.assertRaises(TypeError):
            readpast.Worker(self.c, [self.queue], {}, on_process=42)  # type: ignore[arg-type]


if __name__ == "__main__":
    unittest.main()
