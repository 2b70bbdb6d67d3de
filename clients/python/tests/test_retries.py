"""The Worker rides out a server that fails for a while: against a stub
server that answers 503, drops connections and then recovers, a claim is
tried again, and a completion is retried until it is recorded."""

import json
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple

import support  # noqa: F401  (puts src/ on the path)
import readpast

JOB = {
    "id": 1, "queue": "default", "kind": "add", "payload": {"numbers": [1, 2]}, "priority": 0,
    "state": "running", "attempt": 1, "max_attempts": 25, "run_at": "2025-06-01T12:00:00Z", "group": None,
    "created_at": "2025-06-01T12:00:00Z", "errors": [], "tags": [], "snoozes": 0, "worker": "w",
    "lease_expires_at": "2025-06-01T12:01:00Z", "token": "t-1",
}


class Stub(BaseHTTPRequestHandler):
    """Answers from a script: for each path, a list of (status, body) or
    "drop" (close the connection without an answer), the last one
    repeated."""

    script: Dict[str, List[Any]] = {}
    calls: List[Tuple[str, Any]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"null")
        with self.lock:
            self.calls.append((self.path, body))
            steps = self.script.get(self.path, [(404, {"error": {"code": "not_found", "message": "no such route"}})])
            step = steps.pop(0) if len(steps) > 1 else steps[0]
        if step == "drop":
            self.close_connection = True
            return
        status, answer = step
        if answer == "wait":  # an empty long poll, shortened
            time.sleep(0.2)
            answer = {"jobs": []}
        data = json.dumps(answer).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 503:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the worker stopped and shut its waiting claim

    def log_message(self, format: str, *args: Any) -> None:
        pass


UNAVAILABLE = (503, {"error": {"code": "unavailable", "message": "the database is not answering"}})


class RetriesTest(unittest.TestCase):
    def test_claims_and_completions_ride_out_a_failing_server(self) -> None:
        done = dict(JOB, state="succeeded", result={"sum": 3}, token=None)
        Stub.calls = []
        Stub.script = {
            "/v1/claim": [UNAVAILABLE, "drop", (200, {"jobs": [JOB]}), (200, "wait")],
            "/v1/jobs/1/complete": [UNAVAILABLE, "drop", UNAVAILABLE, (200, done)],
            "/v1/jobs/1/heartbeat": [(200, {"id": 1, "lease_expires_at": "2025-06-01T12:01:00Z"})],
        }
        server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)

        client = readpast.Client("http://127.0.0.1:%d" % server.server_address[1], timeout=5)
        w = readpast.Worker(client, ["default"], {"add": lambda ctx: {"sum": sum(ctx.payload["numbers"])}},
                            wait_seconds=1, lease_seconds=30)
        t = w.start()
        try:
            support.wait_until(lambda: w.counts["succeeded"] == 1, "the completion to be recorded", 20)
        finally:
            w.stop(timeout=5)
            t.join(30)
        self.assertFalse(t.is_alive())
        with Stub.lock:
            calls = list(Stub.calls)
        claims = [b for p, b in calls if p == "/v1/claim"]
        completes = [b for p, b in calls if p == "/v1/jobs/1/complete"]
        self.assertGreaterEqual(len(claims), 3)
        self.assertEqual(claims[0]["worker"], w.name)
        self.assertEqual(completes, [{"token": "t-1", "result": {"sum": 3}}] * 4)
        self.assertEqual((w.counts["claimed"], w.counts["failed"], w.counts["lost"]), (1, 0, 0))


if __name__ == "__main__":
    unittest.main()
