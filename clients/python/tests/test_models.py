"""The parts of the client that need no server: times, path segments,
request bodies, error mapping."""

import datetime as dt
import unittest

import support  # noqa: F401  (puts src/ on the path)
from readpast import _http
from readpast import client as client_module
from readpast import errors, models
import readpast


class TimesTest(unittest.TestCase):
    def test_parse(self) -> None:
        utc = dt.timezone.utc
        self.assertEqual(models.parse_time("2025-06-01T12:00:00Z"), dt.datetime(2025, 6, 1, 12, tzinfo=utc))
        self.assertEqual(models.parse_time("2025-06-01T12:00:00.168966Z").microsecond, 168966)
        self.assertEqual(models.parse_time("2025-06-01T12:00:00.1Z").microsecond, 100000)
        self.assertEqual(models.parse_time("2025-06-01T12:00:00.123456789Z").microsecond, 123456)
        self.assertEqual(models.parse_time("2025-06-01T14:00:00+02:00"), dt.datetime(2025, 6, 1, 12, tzinfo=utc))
        with self.assertRaises(ValueError):
            models.parse_time("yesterday")

    def test_format(self) -> None:
        paris = dt.timezone(dt.timedelta(hours=2))
        self.assertEqual(models.format_time(dt.datetime(2025, 6, 1, 14, 0, 0, 5, tzinfo=paris)),
                         "2025-06-01T12:00:00.000005Z")
        with self.assertRaisesRegex(ValueError, "run_at must be timezone-aware"):
            models.format_time(dt.datetime(2025, 6, 1), "run_at")


class RequestsTest(unittest.TestCase):
    def test_segments(self) -> None:
        seg = _http.segment
        self.assertEqual(seg("customer:*", "key"), "customer:*")
        self.assertEqual(seg("a/b?c%d e", "key"), "a%2Fb%3Fc%25d%20e")
        self.assertEqual(seg(".", "key"), "%2E")
        self.assertEqual(seg("..", "key"), "%2E%2E")
        with self.assertRaises(ValueError):
            seg("", "key")

    def test_job_spec(self) -> None:
        self.assertEqual(readpast.JobSpec("k").to_json(), {"kind": "k"})
        body = readpast.JobSpec("k", payload=[], queue="q", priority=0, max_attempts=1, group="g",
                                unique_key="u", unique_for=dt.timedelta(hours=1), tags=("a", "b"),
                                run_at=dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)).to_json()
        self.assertEqual(body, {"kind": "k", "payload": [], "queue": "q", "priority": 0, "max_attempts": 1,
                                "group": "g", "unique_key": "u", "unique_for_seconds": 3600.0,
                                "tags": ["a", "b"], "run_at": "2030-01-01T00:00:00.000000Z"})

    def test_keys(self) -> None:
        self.assertEqual(readpast.JobSpec("k", keys=("a", "b")).to_json(), {"kind": "k", "keys": ["a", "b"]})
        self.assertEqual(readpast.JobSpec("k", group="a", keys=["a"]).to_json(),
                         {"kind": "k", "group": "a", "keys": ["a"]})
        self.assertEqual(readpast.FlowJob("k", keys=["a", "b"]).to_json(), {"kind": "k", "keys": ["a", "b"]})
        with self.assertRaisesRegex(TypeError, "keys must be a list"):
            readpast.JobSpec("k", keys="ab").to_json()
        wire = {"id": 1, "queue": "q", "kind": "k", "state": "pending", "run_at": "2025-06-01T12:00:00Z",
                "created_at": "2025-06-01T12:00:00Z", "group": "a"}
        self.assertEqual(readpast.Job.from_json(wire).keys, [])
        job = readpast.Job.from_json(dict(wire, keys=["a", "b"]))
        self.assertEqual((job.group, job.keys), ("a", ["a", "b"]))

    def test_client_url(self) -> None:
        with self.assertRaises(ValueError):
            readpast.Client("127.0.0.1:8080")
        self.assertEqual(readpast.Client("http://h:1/").url, "http://h:1")
        self.assertEqual(repr(readpast.Client("http://h:1", token="secret-secret-secret")),
                         "Client('http://h:1', token='…')")

    def test_server_info(self) -> None:
        info = readpast.ServerInfo.from_json(
            {"name": "readpast", "version": "v0.1.0", "revision": "abc", "go_version": "go1.26.8"})
        self.assertEqual(info, readpast.ServerInfo("readpast", "v0.1.0", "abc", "go1.26.8"))

    def test_error_mapping(self) -> None:
        e = errors.error_from_response(409, "stale_token", "token is stale")
        self.assertIsInstance(e, readpast.StaleClaimError)
        self.assertIsInstance(e, readpast.ConflictError)
        e = errors.error_from_response(409, "something_new", "?")
        self.assertIs(type(e), readpast.ConflictError)
        e = errors.error_from_response(418, "teapot", "?")
        self.assertIs(type(e), readpast.APIError)
        e = errors.error_from_response(503, "unavailable", "down", retry_after=2.0)
        self.assertEqual((type(e), e.retry_after), (readpast.UnavailableError, 2.0))
        e = client_module.Client._error(502, b"<html>bad gateway</html>", "3")
        self.assertEqual((e.status, e.code, e.message, e.retry_after), (502, "http_error", "<html>bad gateway</html>", 3.0))
        e = client_module.Client._error(400, b'{"error":{"code":"invalid_field","message":"m","field":"kind"}}', None)
        self.assertEqual((type(e), e.field, str(e)), (readpast.InvalidInputError, "kind", "400 invalid_field: m (field kind)"))


if __name__ == "__main__":
    unittest.main()
