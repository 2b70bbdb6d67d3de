"""What the transport sends: bodies in UTF-8 with non-ASCII characters as
themselves, and the bearer token trimmed, or refused without showing it.
No server needed."""

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Type

from support import readpast
from readpast._transport import _encode


class Bodies(unittest.TestCase):
    def test_non_ascii_goes_as_utf8(self) -> None:
        body = {"s": "日é🙂", "n": 1}
        self.assertEqual(_encode(body), '{"s":"日é🙂","n":1}'.encode("utf-8"))
        # Escaped, 日 took 6 bytes of the server's body limit, not 3.
        self.assertEqual(len(_encode({"s": "日" * 1000})), len('{"s":""}') + 3000)

    def test_a_lone_surrogate_goes_escaped_for_the_server_to_refuse(self) -> None:
        raw = _encode({"s": "a\ud800"})
        self.assertEqual(raw, b'{"s":"a\\ud800"}')
        self.assertEqual(json.loads(raw)["s"], "a\ud800")


class Tokens(unittest.TestCase):
    def test_whitespace_around_a_token_is_not_sent(self) -> None:
        c = readpast.Client("http://127.0.0.1:9", token="t0k3n-t0k3n\n")
        self.assertEqual(c._token, "t0k3n-t0k3n")

    def test_a_token_no_header_can_carry_is_refused_unshown(self) -> None:
        for token in ("t0k3n-ключ", "t0k3n t0k3n", "t0k3n\r\nX-Evil: 1"):
            with self.assertRaises(ValueError) as cm:
                readpast.Client("http://127.0.0.1:9", token=token)
            self.assertNotIn("t0k3n", str(cm.exception))



def serve(test: unittest.TestCase, handler: Type[BaseHTTPRequestHandler]) -> readpast.Client:
    """A client of a server of handler's answers, both closed at the
    test's end."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    test.addCleanup(server.server_close)
    test.addCleanup(server.shutdown)
    c = readpast.Client("http://127.0.0.1:%d" % server.server_address[1], timeout=5)
    test.addCleanup(c.close)
    return c


class EmptyAnswers(unittest.TestCase):
    def test_an_empty_answer_where_one_is_due_is_a_transport_error(self) -> None:
        # A server or proxy that answers 200 and no body (an answer cut
        # short) gets the error a worker retries, not a TypeError.
        class Empty(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        c = serve(self, Empty)
        with self.assertRaises(readpast.TransportError) as e:
            c.release(1, "t")
        self.assertIn("empty", str(e.exception))
        # A claim's empty answer is the server's to a client it saw go.
        self.assertEqual(c._claim("w", ["default"], 1, 30.0, 0, lambda conn: None, False), ([], 0.0))


class ClaimWaits(unittest.TestCase):
    def test_waited_seconds_is_taken_only_as_a_finite_number(self) -> None:
        # What a server or proxy could put in waited_seconds: only a finite
        # number is taken (the worker then bounds it by what the claim
        # took); anything else is none, never an error that would strand
        # the jobs the claim took.
        answers = [
            (b"", 0.0), (b', "waited_seconds": 0.25', 0.25), (b', "waited_seconds": 2', 2.0),
            (b', "waited_seconds": -3', -3.0), (b', "waited_seconds": "0.5"', 0.0),
            (b', "waited_seconds": true', 0.0), (b', "waited_seconds": null', 0.0),
            (b', "waited_seconds": {}', 0.0), (b', "waited_seconds": 1e400', 0.0),
            (b', "waited_seconds": NaN', 0.0), (b', "waited_seconds": -Infinity', 0.0),
            (b', "waited_seconds": 1' + b"0" * 400, 0.0),
        ]
        body = [b""]

        class Canned(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                msg = b'{"jobs": []' + body[0] + b"}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(msg)))
                self.end_headers()
                self.wfile.write(msg)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        c = serve(self, Canned)
        for raw, want in answers:
            body[0] = raw
            with self.subTest(raw=raw[:40]):
                self.assertEqual(c._claim("w", ["default"], 1, 30.0, 0, lambda conn: None, False), ([], want))


if __name__ == "__main__":
    unittest.main()
