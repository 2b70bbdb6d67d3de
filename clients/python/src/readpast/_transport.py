"""The transport of :class:`readpast.Client`: its settings, its kept-alive
connections, and one request sent and its answer decoded."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.parse
from typing import Any, Mapping, Optional, TypeVar

from ._http import ConnectionPool, ConnHook, retry_after_of
from ._version import __version__
from .errors import APIError, TransportError, error_from_response

DEFAULT_TIMEOUT = 30.0
"""Seconds each request may take, by default (a claim adds its wait)."""

_NO_BODY = object()

CONNECT_TIMEOUT = 5.0
"""Seconds a new connection may take to open."""

_T = TypeVar("_T", bound="Transport")


def _encode(body: Any) -> bytes:
    """body as JSON in UTF-8, non-ASCII characters as themselves (escaped,
    each would take 6 to 12 bytes of the server's body limit). A string
    with a lone surrogate, which UTF-8 cannot carry, goes escaped, for the
    server to refuse naming its field."""
    try:
        return json.dumps(body, allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _bearer(token: Optional[str]) -> Optional[str]:
    """The token as sent: without leading or trailing whitespace (a token
    read from a file keeps its newline), as the TypeScript client does;
    one of other than printable ASCII is refused, without showing it."""
    if not token:
        return None
    t = token.strip(" \t\r\n")
    if not t or any(not ("!" <= ch <= "~") for ch in t):
        raise ValueError("token must be printable ASCII without spaces (the token is not shown)")
    return t


class Transport:
    """What every call of the Client goes through (see Client)."""

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        ssl_context: Optional[ssl.SSLContext] = None,
        user_agent: Optional[str] = None,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("url must be an http:// or https:// URL, not %r" % (url,))
        if parts.query or parts.fragment:
            raise ValueError("url must not have a query or fragment: %r" % (url,))
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self._token = _bearer(token)
        self._ssl_context = ssl_context
        self._user_agent = user_agent or "readpast-python/%s" % __version__
        self._path = parts.path.rstrip("/")
        self._pool = ConnectionPool(parts.scheme, parts.netloc, ssl_context)

    def __repr__(self) -> str:
        return "Client(%r, token=%s)" % (self.url, "'…'" if self._token else None)

    # ---- transport -------------------------------------------------------

    def close(self) -> None:
        """Closes the connections kept for reuse. The client stays usable:
        a later call opens a new one."""
        self._pool.close()

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _request(
        self,
        method: str,
        path: str,
        body: Any = _NO_BODY,
        *,
        query: Optional[Mapping[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        hook: Optional[ConnHook] = None,
        empty_ok: bool = False,
    ) -> Any:
        """Sends one request and returns its decoded JSON answer (None for
        204, and for an empty answer when empty_ok), or raises APIError or
        TransportError (an empty answer of another status among them: one
        cut short, which the caller may try again)."""
        target = self._path + path
        if query:
            target += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None
        if body is not _NO_BODY:
            try:
                data = _encode(body)
            except ValueError as e:  # NaN or infinity
                raise ValueError("request body is not JSON: %s" % e) from None
        hdrs = {"Accept": "application/json", "User-Agent": self._user_agent}
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        if self._token:
            hdrs["Authorization"] = "Bearer " + self._token
        hdrs.update(headers or {})
        wait = timeout or self.timeout
        conn = self._pool.get(wait)
        if hook is not None:
            hook(conn)
        try:
            if conn.sock is None:
                # A connection that cannot be made fails within
                # CONNECT_TIMEOUT, however long the request may take.
                conn.timeout = min(wait, CONNECT_TIMEOUT)
                conn.connect()
                conn.timeout = wait
                if conn.sock is not None:
                    conn.sock.settimeout(wait)
                if hook is not None:
                    hook(conn)  # open now: the hook may end it before it is sent
            conn.request(method, target, body=data, headers=hdrs)
            resp = conn.getresponse()
            status = resp.status
            raw = resp.read()
            if hook is not None:
                # Read whole: the hook lets go of the connection.
                hook(None)
                hook = None
            retry_after = resp.getheader("Retry-After")
            reuse = not resp.will_close and not getattr(conn, "readpast_shut", False)
        except (OSError, http.client.HTTPException, socket.timeout) as e:
            if hook is not None:
                hook(None)
            conn.close()
            raise TransportError("%s %s: %s" % (method, path, e or type(e).__name__)) from e
        if reuse:
            self._pool.put(conn)
        else:
            conn.close()
        if status >= 300:
            raise self._error(status, raw, retry_after)
        if status == 204 or (not raw and empty_ok):
            return None
        if not raw:
            raise TransportError("%s %s: the answer (%d) is empty" % (method, path, status))
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise TransportError("%s %s: the answer is not JSON: %s" % (method, path, e)) from e

    @staticmethod
    def _error(status: int, raw: bytes, retry_after: Optional[str]) -> APIError:
        text = raw.decode("utf-8", "replace")
        try:
            err = json.loads(text)["error"]
            code, message, field = err["code"], err.get("message", ""), err.get("field")
            if not isinstance(code, str):
                raise TypeError(code)
        except (ValueError, KeyError, TypeError):
            code, message, field = "http_error", text.strip()[:500] or http.client.responses.get(status, ""), None
        return error_from_response(status, code, message, field, retry_after_of(retry_after))
