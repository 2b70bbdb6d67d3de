"""The windows an adversarial review of the worker found, each replayed:
a batch whose answer is not as documented, a job released before its
handler began, a heartbeat without an answer, and a long poll aborted
after its answer began."""

import threading
import time
import unittest
from typing import Any, List, Optional

from support import client, server_url

import readpast
from readpast import _completer
from readpast._outcomes import _Run
from readpast.handler import JobContext


class Odd:
    """complete_many answering what the API does not."""

    def __init__(self, answers: List[Any]) -> None:
        self.answers = answers

    def complete_many(self, items: List[Any]) -> List[Any]:
        a = self.answers.pop(0)
        if isinstance(a, BaseException):
            raise a
        return a


class CompleterAnswersTest(unittest.TestCase):
    def test_an_unexpected_error_falls_back_and_does_not_wedge(self) -> None:
        comp = _completer.Completer(Odd([KeyError("results"), [None]]))  # type: ignore[arg-type]
        self.assertIs(comp.complete(1, "t", None), _completer.FALLBACK)
        done: List[Any] = []
        t = threading.Thread(target=lambda: done.append(comp.complete(2, "t", None)))
        t.start()
        t.join(5)
        self.assertEqual(done, [None], "the next completion went through")

    def test_too_few_results_fall_back(self) -> None:
        comp = _completer.Completer(Odd([[]]))  # type: ignore[arg-type]
        self.assertIs(comp.complete(1, "t", None), _completer.FALLBACK)


class FakeClient:
    def __init__(self) -> None:
        self.timeouts: List[Optional[float]] = []

    def heartbeat(self, job_id: int, token: str, lease: Optional[float] = None, *,
                  timeout: Optional[float] = None) -> None:
        self.timeouts.append(timeout)
        raise readpast.TransportError("no answer within %s s" % timeout)


def job(i: int = 1) -> readpast.Job:
    return readpast.Job.from_json({
        "id": i, "queue": "q", "kind": "k", "payload": None, "priority": 0, "state": "running",
        "attempt": 1, "max_attempts": 3, "run_at": "2026-01-01T00:00:00Z", "created_at": "2026-01-01T00:00:00Z",
        "errors": [], "token": "t" * 32,
    })


class RunTest(unittest.TestCase):
    def test_a_job_released_before_its_handler_began_is_not_run(self) -> None:
        ran: List[int] = []
        w = readpast.Worker(FakeClient(), ["q"], {"k": lambda ctx: ran.append(1)})  # type: ignore[arg-type]
        now = time.monotonic()
        run = _Run(job(), JobContext(job(), "w", None), now + 30, None, now + 10, w._session)
        self.assertTrue(run.decide())  # the shutdown released it
        self.assertFalse(w._run(run))
        self.assertEqual(ran, [])

    def test_a_heartbeat_without_an_answer_is_bounded_and_tried_again_soon(self) -> None:
        fake = FakeClient()
        w = readpast.Worker(fake, ["q"], {}, lease_seconds=30)  # type: ignore[arg-type]
        now = time.monotonic()
        run = _Run(job(), JobContext(job(), "w", None), now + 30, None, now, w._session)
        w._heartbeat(run)
        self.assertEqual(len(fake.timeouts), 1)
        self.assertLessEqual(fake.timeouts[0] or 0, w.heartbeat_interval)
        self.assertLessEqual(run.next_beat - time.monotonic(), 0.6, "a failed heartbeat is tried again soon")
        self.assertFalse(run.decided)


class HookTest(unittest.TestCase):
    def test_the_hook_lets_go_once_the_answer_began(self) -> None:
        server_url()
        c = client()
        self.addCleanup(c.close)
        seen: List[Any] = []
        c._request("GET", "/v1/stats", hook=seen.append)
        # The connection, before it opens and again once open, then None.
        self.assertEqual(len(seen), 3)
        self.assertIsNotNone(seen[0])
        self.assertIs(seen[1], seen[0])
        self.assertIsNone(seen[2], "the connection is let go before it goes back to the pool")
        seen.clear()
        c._request("GET", "/v1/stats", hook=seen.append)  # a kept connection, open already
        self.assertEqual(len(seen), 2)
        self.assertIsNone(seen[1])


if __name__ == "__main__":
    unittest.main()
