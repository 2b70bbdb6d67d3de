"""Batches against a real `readpast serve`: Client.open_batch,
add_to_batch, seal_batch and batch, the finishing job held until the seal
and every member's end, on_success, and a Worker's finishing job reading
its own batch."""

import threading
import unittest
from typing import Any, Dict, List

import support
from support import readpast, unique

JobSpec = readpast.JobSpec

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def setUpModule() -> None:
    support.server_url()


class BatchesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = support.client()
        self.queue = unique("bt")

    def tearDown(self) -> None:
        self.c.close()

    def claim_all(self) -> List[readpast.Job]:
        return self.c.claim("py-bt", [self.queue], limit=10)

    def test_lifecycle(self) -> None:
        b = self.c.open_batch(JobSpec("notify", {"to": "ops"}, queue=self.queue))
        self.assertIsInstance(b, readpast.Batch)
        self.assertEqual((b.id, b.on_success, b.sealed), (b.finisher.id, False, False))
        self.assertEqual((b.finisher.kind, b.finisher.state, b.finisher.payload), ("notify", "blocked", {"to": "ops"}))
        self.assertEqual((b.members, b.live, b.succeeded, b.failed, b.cancelled), (0, 0, 0, 0, 0))
        self.assertEqual(b.raw["id"], b.id)

        first = self.c.add_to_batch(b.id, [JobSpec("thumb", {"file": "a"}, queue=self.queue),
                                           {"kind": "thumb", "payload": {"file": "b"}, "queue": self.queue,
                                            "max_attempts": 1}])
        self.assertEqual([(j.kind, j.state, j.payload) for j in first],
                         [("thumb", "pending", {"file": "a"}), ("thumb", "pending", {"file": "b"})])
        second = self.c.add_to_batch(b.id, (JobSpec("thumb", queue=self.queue) for _ in range(1)))
        members = first + second
        got = self.c.batch(b.id)
        self.assertEqual((got.members, got.live, got.sealed, got.finisher.state), (3, 3, False, "blocked"))

        claimed = self.claim_all()
        self.assertEqual(sorted(j.id for j in claimed), sorted(j.id for j in members),
                         "a claim took the finishing job of an open batch")
        for j in claimed:
            assert j.token is not None
            if j.id == members[1].id:
                self.assertEqual(self.c.fail(j.id, j.token, "broken image").state, "failed")
            else:
                self.c.complete(j.id, j.token, {"ok": True})
        got = self.c.batch(b.id)
        self.assertEqual((got.members, got.live, got.succeeded, got.failed, got.cancelled), (3, 0, 2, 1, 0))
        self.assertEqual(got.finisher.state, "blocked")
        self.assertEqual(self.claim_all(), [], "the finishing job ran before the seal")

        sealed = self.c.seal_batch(b.id)
        self.assertTrue(sealed.sealed)
        self.assertEqual(sealed.finisher.state, "pending")
        again = self.c.seal_batch(b.id)
        self.assertEqual((again.sealed, again.members, again.finisher.state), (True, 3, "pending"))

        [fin] = self.claim_all()
        self.assertEqual((fin.id, fin.kind), (b.id, "notify"))
        seen = self.c.batch(fin.id)
        self.assertEqual((seen.sealed, seen.members, seen.succeeded, seen.failed, seen.finisher.state),
                         (True, 3, 2, 1, "running"))

        with self.assertRaises(readpast.InvalidStateError) as cm:
            self.c.add_to_batch(b.id, [JobSpec("thumb", queue=self.queue)])
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "invalid_state"))
        self.assertIn("sealed", cm.exception.message)
        self.assertEqual(self.c.batch(b.id).members, 3, "a refused join stored a member")

        rel = self.c.relatives(b.id)
        self.assertEqual(sorted(r.edge.parent_id for r in rel.parents), sorted(j.id for j in members))
        assert fin.token is not None
        self.assertEqual(self.c.complete(fin.id, fin.token).state, "succeeded")

    def test_on_success_member_fails(self) -> None:
        b = self.c.open_batch({"kind": "notify", "queue": self.queue}, on_success=True)
        self.assertTrue(b.on_success)
        ok, bad = self.c.add_to_batch(b.id, [{"kind": "m", "queue": self.queue},
                                             {"kind": "m", "queue": self.queue, "max_attempts": 1}])
        for j in self.claim_all():
            assert j.token is not None
            if j.id == bad.id:
                self.c.fail(j.id, j.token, "no")
            else:
                self.c.complete(j.id, j.token)
        got = self.c.batch(b.id)
        self.assertEqual(got.finisher.state, "cancelled")
        self.assertIn(str(bad.id), got.finisher.errors[-1].message)
        self.assertEqual((got.sealed, got.succeeded, got.failed), (True, 1, 1))
        with self.assertRaises(readpast.InvalidStateError) as cm:
            self.c.add_to_batch(b.id, [{"kind": "m", "queue": self.queue}])
        self.assertIn("cancelled", cm.exception.message)
        self.assertEqual(self.claim_all(), [])

    def test_empty_batch_runs_at_its_seal(self) -> None:
        b = self.c.open_batch(JobSpec("notify", queue=self.queue), traceparent=TRACEPARENT)
        self.assertEqual(b.finisher.traceparent, TRACEPARENT)
        self.assertEqual(self.claim_all(), [])
        self.assertEqual(self.c.seal_batch(b.id).finisher.state, "pending")
        self.assertEqual([j.id for j in self.claim_all()], [b.id])

    def test_worker_finisher_reads_its_batch(self) -> None:
        seen: Dict[str, Any] = {}
        done = threading.Event()

        def notify(ctx: readpast.JobContext) -> None:
            got = self.c.batch(ctx.id)
            seen["counts"] = (got.members, got.live, got.succeeded, got.failed)
            done.set()

        def thumb(ctx: readpast.JobContext) -> None:
            if ctx.payload.get("bad"):
                raise readpast.Discard("cannot read it")

        w = readpast.Worker(self.c, [self.queue], {"notify": notify, "thumb": thumb},
                            name=unique("pyw"), wait_seconds=1)
        t = w.start()
        self.addCleanup(lambda: (w.stop(timeout=5), t.join(30)))
        b = self.c.open_batch(JobSpec("notify", queue=self.queue))
        self.c.add_to_batch(b.id, [JobSpec("thumb", {"n": i}, queue=self.queue) for i in range(3)])
        self.c.add_to_batch(b.id, [JobSpec("thumb", {"bad": True}, queue=self.queue)])
        self.c.seal_batch(b.id)
        self.assertTrue(done.wait(30), "the finishing job did not run")
        self.assertEqual(seen["counts"], (4, 0, 3, 1))

    def test_errors(self) -> None:
        b = self.c.open_batch(JobSpec("notify", queue=self.queue))
        [m] = self.c.add_to_batch(b.id, [JobSpec("m", queue=self.queue)])
        for call in (lambda: self.c.batch(10 ** 12), lambda: self.c.seal_batch(10 ** 12),
                     lambda: self.c.add_to_batch(10 ** 12, [JobSpec("m")]), lambda: self.c.batch(m.id)):
            with self.assertRaises(readpast.NotFoundError):
                call()

        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.open_batch(JobSpec("notify", queue=self.queue, unique_key=unique("k")))
        self.assertEqual(cm.exception.field, "finisher.unique_key")
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.add_to_batch(b.id, [JobSpec("m", queue=self.queue), {"kind": "m", "unique_for_seconds": 5}])
        self.assertEqual(cm.exception.field, "jobs[1].unique_for_seconds")
        with self.assertRaises(readpast.InvalidInputError) as cm:
            self.c.open_batch({"kind": "notify", "queue": self.queue, "priority": 5000})
        self.assertEqual(cm.exception.field, "finisher.priority")
        self.assertEqual(self.c.batch(b.id).members, 1, "a refused join stored a member")
        self.assertEqual(len(self.c.list_jobs(queue=self.queue).jobs), 2, "a refused call stored a job")

        # Refused before anything is sent.
        with self.assertRaises(ValueError):
            self.c.add_to_batch(b.id, [])
        with self.assertRaises(TypeError):
            self.c.add_to_batch(b.id, {"kind": "m"})
        with self.assertRaises(TypeError):
            self.c.add_to_batch(b.id, ["m"])  # type: ignore[list-item]
        with self.assertRaises(TypeError):
            self.c.open_batch("notify")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            self.c.open_batch(JobSpec("notify"), on_success="yes")  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            self.c.batch(0)
        with self.assertRaises(TypeError):
            self.c.seal_batch(str(b.id))  # type: ignore[arg-type]


class BatchModelTest(unittest.TestCase):
    def test_from_json(self) -> None:
        d = {"id": 41, "on_success": True, "sealed": True, "members": 3, "live": 0, "succeeded": 2, "failed": 1,
             "cancelled": 0, "later": "kept in raw",
             "finisher": {"id": 41, "queue": "default", "kind": "notify", "state": "pending",
                          "run_at": "2026-01-01T00:00:00Z", "created_at": "2026-01-01T00:00:00Z"}}
        b = readpast.Batch.from_json(d)
        self.assertEqual((b.id, b.on_success, b.sealed, b.members, b.live, b.succeeded, b.failed, b.cancelled),
                         (41, True, True, 3, 0, 2, 1, 0))
        self.assertEqual((b.finisher.id, b.finisher.state), (41, "pending"))
        self.assertEqual(b.raw["later"], "kept in raw")


if __name__ == "__main__":
    unittest.main()
