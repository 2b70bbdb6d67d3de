"""Helpers of the client's tests: the server they run against, unique
names, and waiting for a condition with a deadline.

The tests that talk to a server need READPAST_URL and READPAST_TOKEN (a
full token); `go test ./clients/python` starts a `readpast serve` on
SQLite and sets them. Without READPAST_URL those tests are skipped with a
message, unless CI=true, where that is an error.
"""

import os
import sys
import time
import unittest
import uuid
from typing import Callable, Optional, TypeVar

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

import readpast  # noqa: E402  (after the path is set)

T = TypeVar("T")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def server_url() -> str:
    url = os.environ.get("READPAST_URL", "")
    if not url:
        msg = "READPAST_URL is not set: run `go test ./clients/python`, which starts a server for these tests"
        if in_ci():
            raise RuntimeError(msg)
        raise unittest.SkipTest(msg)
    return url


def client(**kw: object) -> readpast.Client:
    """A client of the test server with the full token."""
    return readpast.Client(server_url(), token=os.environ.get("READPAST_TOKEN"), **kw)  # type: ignore[arg-type]


def unique(prefix: str) -> str:
    """A name no other test uses (queues, kinds, schedules, keys)."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def wait_until(check: Callable[[], Optional[T]], what: str, timeout: float = 15.0, every: float = 0.05) -> T:
    """Calls check until it returns something truthy, and returns it;
    fails with what after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %gs waiting for %s (last: %r)" % (timeout, what, got))
        time.sleep(every)
