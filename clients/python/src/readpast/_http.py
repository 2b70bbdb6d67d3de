"""The client's HTTP helpers: a pool of keep-alive connections, path
segments, and request bodies."""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Callable, Dict, List, Optional

# What a path segment may hold as it is, besides letters, digits and
# "-._~": the API's keys keep ":" and "*" readable (customer:*).
_SEGMENT_SAFE = ":*"

# Called with a request's connection before it is sent, and with None once
# its answer has begun (or it failed).
ConnHook = Callable[[Optional[http.client.HTTPConnection]], None]

# The most idle connections a client keeps open for reuse.
MAX_IDLE = 64


class ConnectionPool:
    """Keep-alive connections to one server, shared by threads: a request
    takes an idle connection (or opens one) and gives it back once its
    answer is read whole, unless the server said it would close it. A
    connection the server closed while it sat idle is noticed before it
    is used (it reads as ready: end of stream) and dropped, so a request
    is never sent on it."""

    def __init__(self, scheme: str, netloc: str, ssl_context: Optional[ssl.SSLContext]) -> None:
        self._scheme = scheme
        self._netloc = netloc
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._idle: List[http.client.HTTPConnection] = []

    def get(self, timeout: float) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            sock = conn.sock
            if sock is not None and not _readable(sock):
                sock.settimeout(timeout)
                conn.timeout = timeout
                return conn
            conn.close()
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._netloc, timeout=timeout, context=self._ssl_context)
        return http.client.HTTPConnection(self._netloc, timeout=timeout)

    def put(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection's socket has something to read: for an
    idle HTTP/1.1 connection that is the server closing it."""
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


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


def trace_headers(traceparent: Optional[str] = None, tracestate: Optional[str] = None) -> Dict[str, str]:
    """The W3C Trace Context headers of an enqueue: ``traceparent`` and,
    with it, ``tracestate``; empty when both are None. The server stores
    them on the jobs (or, when it traces, makes its span a child of them
    and stores that span's context) and refuses malformed ones
    (:class:`InvalidInputError` naming the header). With
    opentelemetry-python, ``opentelemetry.propagate.inject(carrier)`` fills
    a dict with the current span's context: pass its values here."""
    headers: Dict[str, str] = {}
    if traceparent is None:
        if tracestate is not None:
            raise ValueError("tracestate needs a traceparent")
        return headers
    if not isinstance(traceparent, str) or not isinstance(tracestate, (str, type(None))):
        raise TypeError("traceparent and tracestate must be strings")
    headers["traceparent"] = traceparent
    if tracestate:
        headers["tracestate"] = tracestate
    return headers
