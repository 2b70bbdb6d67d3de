"""The client's HTTP helpers: connections another thread can shut, path
segments, and request bodies."""

from __future__ import annotations

import http.client
import ssl
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Optional

# What a path segment may hold as it is, besides letters, digits and
# "-._~": the API's keys keep ":" and "*" readable (customer:*).
_SEGMENT_SAFE = ":*"

ConnHook = Callable[[http.client.HTTPConnection], None]


class HookedHTTPHandler(urllib.request.HTTPHandler):
    """An HTTP handler that hands each connection it opens to a hook, so
    that another thread can shut it down (to end a long poll at once)."""

    def __init__(self, hook: ConnHook) -> None:
        super().__init__()
        self._hook = hook

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connect(host: str, **kw: Any) -> http.client.HTTPConnection:
            conn = http.client.HTTPConnection(host, **kw)
            self._hook(conn)
            return conn

        return self.do_open(connect, req)  # type: ignore[arg-type]


class HookedHTTPSHandler(urllib.request.HTTPSHandler):
    """The HTTPS form of HookedHTTPHandler."""

    def __init__(self, hook: ConnHook, context: Optional[ssl.SSLContext]) -> None:
        super().__init__(context=context)
        self._hook = hook
        self._ctx = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connect(host: str, **kw: Any) -> http.client.HTTPConnection:
            kw.setdefault("context", self._ctx)
            conn = http.client.HTTPSConnection(host, **kw)
            self._hook(conn)
            return conn

        return self.do_open(connect, req)  # type: ignore[arg-type]


def segment(value: str, name: str) -> str:
    """value as one path segment: percent-encoded, with "." and ".." kept
    from meaning a folder."""
    if not isinstance(value, str):
        raise TypeError("%s must be a str, not %s" % (name, type(value).__name__))
    if value == "":
        raise ValueError("%s must not be empty" % name)
    if value in (".", ".."):
        return value.replace(".", "%2E")
    return urllib.parse.quote(value, safe=_SEGMENT_SAFE)


def job_id_of(job_id: int) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise TypeError("job id must be an int, not %s" % type(job_id).__name__)
    if job_id < 1:
        raise ValueError("job id must be positive, not %d" % job_id)
    return job_id


def retry_after_of(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def set_fields(body: Dict[str, Any], **fields: Any) -> Dict[str, Any]:
    """body with the fields that are not None."""
    for k, v in fields.items():
        if v is not None:
            body[k] = v
    return body
