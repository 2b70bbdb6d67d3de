"""Client.enqueue_flow against a real `readpast serve`: jobs that run after
other jobs, their edges' policies, and the refusals."""

import unittest

import support
from support import readpast, unique

FlowJob = readpast.FlowJob
After = readpast.After

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def setUpModule() -> None:
    support.server_url()


class FlowTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = support.client()
        self.queue = unique("flow")

    def tearDown(self) -> None:
        self.c.close()

    def finish(self, kind: str, ok: bool = True) -> readpast.Job:
        """Claims the one pending job of the test's queue, requires its
        kind, and completes it (or fails it for good)."""
        claimed = self.c.claim("py-flow", [self.queue], limit=10, lease_seconds=60)
        self.assertEqual([j.kind for j in claimed], [kind])
        job = claimed[0]
        assert job.token is not None
        if ok:
            return self.c.complete(job.id, job.token)
        return self.c.fail(job.id, job.token, "boom", discard=True)

    def test_flow_runs_in_order(self) -> None:
        prior = self.c.enqueue("prior", queue=self.queue)
        jobs = self.c.enqueue_flow([
            FlowJob("extract", {"file": "a.csv"}, ref="extract", queue=self.queue, tags=["f"]),
            FlowJob("render", ref="render", queue=self.queue, after=["extract"]),
            FlowJob("email", queue=self.queue, max_attempts=2,
                    after=[After(ref="extract"), After(ref="render", policy="run_anyway"), prior.id]),
        ])
        self.assertEqual([j.kind for j in jobs], ["extract", "render", "email"])
        self.assertEqual([j.state for j in jobs], ["pending", "blocked", "blocked"])
        self.assertEqual(jobs[0].payload, {"file": "a.csv"})
        self.assertEqual(jobs[0].tags, ["f"])
        self.assertEqual(jobs[2].max_attempts, 2)
        self.assertEqual(self.c.stats().queues[self.queue], readpast.StateCounts(pending=2, blocked=2))
        blocked = self.c.list_jobs(queue=self.queue, state="blocked").jobs
        self.assertEqual(sorted(j.id for j in blocked), sorted([jobs[1].id, jobs[2].id]))

        claimed = self.c.claim("py-flow", [self.queue], limit=10, lease_seconds=60)
        self.assertEqual(sorted(j.kind for j in claimed), ["extract", "prior"])
        for j in claimed:
            assert j.token is not None
            self.c.complete(j.id, j.token)
        self.assertEqual(self.c.get_job(jobs[1].id).state, "pending")
        self.assertEqual(self.c.get_job(jobs[2].id).state, "blocked")
        # render fails for good; email runs anyway.
        self.finish("render", ok=False)
        self.assertEqual(self.c.get_job(jobs[2].id).state, "pending")
        self.assertEqual(self.finish("email").state, "succeeded")

    def test_cancel_child_and_hold_child(self) -> None:
        a, b, c = self.c.enqueue_flow([
            {"ref": "a", "kind": "a", "queue": self.queue},
            {"kind": "b", "queue": self.queue, "after": [{"ref": "a"}]},
            {"kind": "c", "queue": self.queue, "after": [{"ref": "a", "policy": "hold_child"}]},
        ])
        self.assertEqual((b.state, c.state), ("blocked", "blocked"))
        # A blocked job cannot be run now.
        with self.assertRaises(readpast.InvalidStateError):
            self.c.run_job(b.id)
        self.finish("a", ok=False)
        got_b = self.c.get_job(b.id)
        self.assertEqual(got_b.state, "cancelled")
        self.assertTrue(got_b.errors)
        self.assertEqual(self.c.get_job(c.id).state, "blocked")
        # The held child goes on once its parent is retried and succeeds.
        self.c.retry_job(a.id)
        self.finish("a")
        self.assertEqual(self.finish("c").state, "succeeded")

    def test_trace_context(self) -> None:
        jobs = self.c.enqueue_flow([FlowJob("t", ref="t", queue=self.queue), FlowJob("u", queue=self.queue, after=["t"])],
                                   traceparent=TRACEPARENT)
        self.assertEqual([j.traceparent for j in jobs], [TRACEPARENT, TRACEPARENT])

    def test_refusals(self) -> None:
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.enqueue_flow([FlowJob("a", queue=self.queue, after=["nope"])])
        self.assertEqual(cm.exception.field, "jobs[0].after[0].ref")
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.enqueue_flow([FlowJob("a", ref="a", after=["b"]), FlowJob("b", ref="b", after=["a"])])
        self.assertIn("cycle", str(cm.exception))
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.enqueue_flow([{"kind": "a", "unique_key": "k"}])
        self.assertEqual(cm.exception.field, "jobs[0].unique_key")
        with self.assertRaises(readpast.NotFoundError) as nf:
            self.c.enqueue_flow([FlowJob("a", queue=self.queue, after=[99999999])])
        self.assertIn("99999999", str(nf.exception))
        done = self.c.enqueue("done", queue=self.queue)
        self.c.cancel_job(done.id)
        with self.assertRaises(readpast.InvalidStateError) as st:
            self.c.enqueue_flow([FlowJob("a", queue=self.queue, after=[After(job_id=done.id)])])
        self.assertIn(str(done.id), str(st.exception))
        self.assertEqual([j.id for j in self.c.list_jobs(queue=self.queue).jobs], [done.id])  # nothing else stored

        # Refused before anything is sent.
        with self.assertRaises(ValueError):
            self.c.enqueue_flow([])
        with self.assertRaises(ValueError):
            After(ref="a", job_id=1).to_json()
        with self.assertRaises(ValueError):
            After(ref="a", policy="maybe").to_json()
        with self.assertRaises(TypeError):
            FlowJob("a", after="b").to_json()  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            FlowJob("a", after=[True]).to_json()  # type: ignore[list-item]

    def test_to_json(self) -> None:
        self.assertEqual(
            FlowJob("k", {"x": 1}, ref="r", queue="q", after=["a", 7, After(ref="b", policy="hold_child"), {"job_id": 8}]).to_json(),
            {"kind": "k", "payload": {"x": 1}, "ref": "r", "queue": "q",
             "after": [{"ref": "a"}, {"job_id": 7}, {"ref": "b", "policy": "hold_child"}, {"job_id": 8}]},
        )
        self.assertEqual(FlowJob("k").to_json(), {"kind": "k"})
        self.assertEqual(readpast.EDGE_POLICIES, ("cancel_child", "run_anyway", "hold_child"))


if __name__ == "__main__":
    unittest.main()
