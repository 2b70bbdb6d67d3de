"""What the transport sends: bodies in UTF-8 with non-ASCII characters as
themselves, and the bearer token trimmed, or refused without showing it.
No server needed."""

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


if __name__ == "__main__":
    unittest.main()


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

        server = ThreadingHTTPServer(("127.0.0.1", 0), Empty)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        c = readpast.Client("http://127.0.0.1:%d" % server.server_address[1], timeout=5)
        self.addCleanup(c.close)
        with self.assertRaises(readpast.TransportError) as e:
            c.release(1, "t")
        self.assertIn("empty", str(e.exception))
        # A claim's empty answer is the server's to a client it saw go.
        self.assertEqual(c._claim("w", ["default"], 1, 30.0, 0, lambda conn: None, False), ([], 0.0))
