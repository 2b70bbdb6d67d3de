"""What the transport sends: bodies in UTF-8 with non-ASCII characters as
themselves, and the bearer token trimmed, or refused without showing it.
No server needed."""

import json
import unittest

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
