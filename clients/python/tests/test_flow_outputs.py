"""Flow outputs and inspection against a real `readpast serve`: a child's
parents' results over the claim and in a Worker's handler,
Client.relatives and Client.flow_graph."""

import threading
import unittest
from typing import Any, Dict, List

import support
from support import readpast, unique, wait_until

FlowJob = readpast.FlowJob
After = readpast.After


def setUpModule() -> None:
    support.server_url()


class FlowOutputsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = support.client()
        self.queue = unique("fo")

    def tearDown(self) -> None:
        self.c.close()

    def flow(self) -> List[readpast.Job]:
        return self.c.enqueue_flow([
            FlowJob("extract", ref="extract", queue=self.queue),
            FlowJob("flaky", ref="flaky", queue=self.queue, max_attempts=1),
            FlowJob("report", queue=self.queue, after=["extract", After(ref="flaky", policy="run_anyway")]),
        ])

    def test_claim_parent_results(self) -> None:
        extract, flaky, report = self.flow()
        parents = self.c.claim("py-fo", [self.queue], limit=2, parent_results=True)
        self.assertEqual(sorted(j.id for j in parents), [extract.id, flaky.id])
        self.assertEqual([j.parent_results for j in parents], [None, None])
        for j in parents:
            assert j.token is not None
            if j.id == extract.id:
                self.c.complete(j.id, j.token, {"rows": 3})
            else:
                self.c.fail(j.id, j.token, "boom")
        [child] = self.c.claim("py-fo", [self.queue], parent_results=True)
        self.assertEqual(child.id, report.id)
        self.assertEqual(child.parent_results, {"extract": {"rows": 3}, "flaky": None})

    def test_claim_without_parent_results(self) -> None:
        p, ch = self.c.enqueue_flow([
            FlowJob("p", ref="p", queue=self.queue),
            FlowJob("c", queue=self.queue, after=["p"]),
        ])
        [j] = self.c.claim("py-fo", [self.queue])
        assert j.token is not None
        self.c.complete(j.id, j.token, 1)
        [child] = self.c.claim("py-fo", [self.queue])
        self.assertEqual(child.id, ch.id)
        self.assertIsNone(child.parent_results)
        self.assertNotIn("parent_results", child.raw)

    def test_worker_parent_results(self) -> None:
        seen: Dict[str, Any] = {}
        done = threading.Event()

        def report(ctx: readpast.JobContext) -> None:
            seen["results"] = ctx.parent_results
            done.set()

        def flaky(ctx: readpast.JobContext) -> None:
            raise RuntimeError("flaky fails for good")

        w = readpast.Worker(self.c, [self.queue], {
            "extract": lambda ctx: {"rows": 3}, "flaky": flaky, "report": report,
        }, name=unique("pyw"), wait_seconds=1, parent_results=True)
        t = w.start()
        self.addCleanup(lambda: (w.stop(timeout=5), t.join(30)))
        self.flow()
        self.assertTrue(done.wait(30), "the child did not run")
        self.assertEqual(seen["results"], {"extract": {"rows": 3}, "flaky": None})

    def test_relatives_and_flow_graph(self) -> None:
        extract, flaky, report = self.flow()
        rel = self.c.relatives(report.id)
        self.assertEqual(rel.children, [])
        self.assertEqual([(r.edge.parent_id, r.edge.parent_ref, r.edge.policy, r.edge.state) for r in rel.parents],
                         [(extract.id, "extract", "cancel_child", "open"), (flaky.id, "flaky", "run_anyway", "open")])
        for r in rel.parents:
            assert r.job is not None
            self.assertEqual(r.job.state, "pending")
            self.assertEqual(r.edge.child_id, report.id)
            self.assertIsNone(r.edge.child_ref)
        rel = self.c.relatives(extract.id, limit=1)
        self.assertEqual([r.edge.child_id for r in rel.children], [report.id])
        assert rel.children[0].job is not None
        self.assertEqual(rel.children[0].job.state, "blocked")

        g = self.c.flow_graph(extract.id)
        self.assertEqual([j.id for j in g.jobs], [extract.id, report.id, flaky.id])
        self.assertEqual(sorted((e.parent_id, e.child_id) for e in g.edges),
                         [(extract.id, report.id), (flaky.id, report.id)])
        self.assertFalse(g.truncated)
        g = self.c.flow_graph(extract.id, limit=2)
        self.assertEqual([j.id for j in g.jobs], [extract.id, report.id])
        self.assertEqual(len(g.edges), 1)
        self.assertTrue(g.truncated)

        with self.assertRaises(readpast.NotFoundError):
            self.c.relatives(10 ** 12)
        with self.assertRaises(readpast.NotFoundError):
            self.c.flow_graph(10 ** 12)
        with self.assertRaises(ValueError):
            self.c.relatives(report.id, limit=0)
        with self.assertRaises(ValueError):
            self.c.flow_graph(report.id, limit=2001)
        wait_until(lambda: True, "nothing")
