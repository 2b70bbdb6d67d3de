"""The HTTP client of the readpast API: :class:`Client`."""

from __future__ import annotations

import datetime as _dt
import http.client
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import (
    ConnHook,
    HookedHTTPHandler,
    HookedHTTPSHandler,
    job_id_of,
    retry_after_of,
    segment,
    set_fields,
)
from ._version import __version__
from .errors import APIError, TransportError, error_from_response
from .models import (
    JSON,
    BulkResult,
    Job,
    JobPage,
    JobSpec,
    Limit,
    Queue,
    Schedule,
    ServerInfo,
    Stats,
    TokenGrant,
    format_time,
    parse_time,
    to_seconds,
)

__all__ = ["Client", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 30.0
"""Seconds each request may take, by default (a claim adds its wait)."""

_NO_BODY = object()

class Client:
    """A client of one readpast server's HTTP API (``/v1``).

    ``url`` is the server's base URL (``http://127.0.0.1:8080``); ``token``
    the bearer token (a read token will do for the methods that only
    read). ``timeout`` bounds each request in seconds (a claim adds its
    long-poll wait). ``ssl_context`` is used for ``https`` URLs.

    Every method sends one request (``iter_jobs`` one per page) and either
    returns what the server answered or raises: an :class:`APIError`
    subclass for an error answer (``NotFoundError``, ``InvalidInputError``,
    ``StaleClaimError``, ...; see :mod:`readpast.errors`), or a
    :class:`TransportError` when no answer came. Nothing is retried here;
    :class:`readpast.Worker` retries what is safe to.

    The client holds no connection between calls and may be shared by
    threads.
    """

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
        self._token = token or None
        self._ssl_context = ssl_context
        self._user_agent = user_agent or "readpast-python/%s" % __version__
        self._opener = self._build_opener(None)

    def __repr__(self) -> str:
        return "Client(%r, token=%s)" % (self.url, "'…'" if self._token else None)

    # ---- transport -------------------------------------------------------

    def _build_opener(self, hook: Optional[ConnHook]) -> urllib.request.OpenerDirector:
        if hook is None:
            return urllib.request.build_opener(urllib.request.HTTPSHandler(context=self._ssl_context))
        return urllib.request.build_opener(
            HookedHTTPHandler(hook), HookedHTTPSHandler(hook, self._ssl_context)
        )

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
    ) -> Any:
        """Sends one request and returns its decoded JSON answer (None for
        204), or raises APIError or TransportError."""
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None
        if body is not _NO_BODY:
            try:
                data = json.dumps(body, allow_nan=False, separators=(",", ":")).encode("utf-8")
            except ValueError as e:  # NaN or infinity
                raise ValueError("request body is not JSON: %s" % e) from None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", self._user_agent)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._token:
            req.add_header("Authorization", "Bearer " + self._token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        opener = self._opener if hook is None else self._build_opener(hook)
        try:
            with opener.open(req, timeout=timeout or self.timeout) as resp:
                status = resp.status
                raw = resp.read()
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            raise self._error(e.code, raw, e.headers.get("Retry-After") if e.headers else None) from None
        except urllib.error.URLError as e:
            raise TransportError("%s %s: %s" % (method, path, e.reason)) from e
        except (OSError, http.client.HTTPException, socket.timeout) as e:
            raise TransportError("%s %s: %s" % (method, path, e or type(e).__name__)) from e
        if status == 204 or not raw:
            return None
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

    # ---- server ----------------------------------------------------------

    def info(self) -> ServerInfo:
        """``GET /v1``: which server this is."""
        return ServerInfo.from_json(self._request("GET", "/v1"))

    def healthy(self) -> bool:
        """``GET /healthz``: whether the server process answers."""
        try:
            return self._request("GET", "/healthz").get("status") == "ok"
        except TransportError:
            return False

    def ready(self) -> bool:
        """``GET /readyz``: whether the server's database answers (False on
        503 or no answer)."""
        try:
            return self._request("GET", "/readyz").get("status") == "ready"
        except (TransportError, APIError) as e:
            if isinstance(e, APIError) and e.status != 503:
                raise
            return False

    def openapi(self) -> Dict[str, Any]:
        """``GET /v1/openapi.json``: the API's OpenAPI 3.1 document."""
        doc: Dict[str, Any] = self._request("GET", "/v1/openapi.json")
        return doc

    # ---- enqueue ---------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        payload: JSON = None,
        *,
        queue: Optional[str] = None,
        priority: Optional[int] = None,
        run_at: Optional[Union[_dt.datetime, _dt.timedelta]] = None,
        max_attempts: Optional[int] = None,
        group: Optional[str] = None,
        unique_key: Optional[str] = None,
        unique_for: Optional[Union[float, _dt.timedelta]] = None,
        tags: Optional[Sequence[str]] = None,
        idempotency_key: Optional[str] = None,
    ) -> Job:
        """``POST /v1/jobs``: enqueues one job and returns it.

        See :class:`JobSpec` for the options. With ``unique_key``, or with
        ``idempotency_key`` (the ``Idempotency-Key`` header: the same
        request sent again within the server's idempotency period returns
        the job the first one made), an enqueue whose key is held creates
        nothing and returns the holder with ``duplicate`` True.
        """
        spec = JobSpec(
            kind=kind,
            payload=payload,
            queue=queue,
            priority=priority,
            run_at=run_at,
            max_attempts=max_attempts,
            group=group,
            unique_key=unique_key,
            unique_for=unique_for,
            tags=tags,
        )
        headers = None
        if idempotency_key is not None:
            headers = {"Idempotency-Key": idempotency_key}
        return Job.from_json(self._request("POST", "/v1/jobs", spec.to_json(), headers=headers))

    def enqueue_many(self, jobs: Iterable[Union[JobSpec, Mapping[str, Any]]]) -> List[Job]:
        """``POST /v1/jobs/batch``: enqueues jobs atomically (all or none) and
        returns them in order. Each is a :class:`JobSpec` or a mapping of
        the API's enqueue fields. An error names the entry
        (``field="jobs[3].kind"``)."""
        body: List[Dict[str, Any]] = []
        for j in jobs:
            body.append(j.to_json() if isinstance(j, JobSpec) else dict(j))
        if not body:
            raise ValueError("enqueue_many needs at least one job")
        return [Job.from_json(j) for j in self._request("POST", "/v1/jobs/batch", {"jobs": body})["jobs"]]

    # ---- jobs ------------------------------------------------------------

    def get_job(self, job_id: int) -> Job:
        """``GET /v1/jobs/{id}``."""
        return Job.from_json(self._request("GET", "/v1/jobs/%d" % job_id_of(job_id)))

    def list_jobs(
        self,
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        kind: Optional[str] = None,
        group: Optional[str] = None,
        tag: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        summary: bool = False,
    ) -> JobPage:
        """``GET /v1/jobs``: one page of jobs, newest first, matching every
        filter given. Pass the page's ``next_cursor`` as ``cursor`` for the
        next one (None on the last page). With ``summary`` the jobs come
        without payload, result and errors."""
        query = {
            "queue": queue,
            "state": state,
            "kind": kind,
            "group": group,
            "tag": tag,
            "limit": limit,
            "cursor": cursor,
            "summary": "true" if summary else None,
        }
        for k, v in query.items():
            if v == "":
                raise ValueError("%s must not be empty (leave it out not to filter)" % k)
        d = self._request("GET", "/v1/jobs", query=query)
        return JobPage(jobs=[Job.from_json(j) for j in d["jobs"]], next_cursor=d.get("next_cursor"))

    def iter_jobs(
        self,
        *,
        queue: Optional[str] = None,
        state: Optional[str] = None,
        kind: Optional[str] = None,
        group: Optional[str] = None,
        tag: Optional[str] = None,
        page_size: Optional[int] = None,
        summary: bool = False,
    ) -> Iterator[Job]:
        """Every job matching the filters, newest first, following the
        cursor page by page."""
        cursor: Optional[str] = None
        while True:
            page = self.list_jobs(
                queue=queue, state=state, kind=kind, group=group, tag=tag,
                limit=page_size, cursor=cursor, summary=summary,
            )
            yield from page.jobs
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def cancel_job(self, job_id: int) -> Job:
        """``POST /v1/jobs/{id}/cancel``: cancels a pending or running job
        (a running job's claim token goes stale); a finished job is
        :class:`InvalidStateError`."""
        return Job.from_json(self._request("POST", "/v1/jobs/%d/cancel" % job_id_of(job_id), {}))

    def retry_job(self, job_id: int) -> Job:
        """``POST /v1/jobs/{id}/retry``: makes a failed or cancelled job
        pending now with its attempts reset, or a pending job due now."""
        return Job.from_json(self._request("POST", "/v1/jobs/%d/retry" % job_id_of(job_id), {}))

    def run_job(self, job_id: int) -> Job:
        """``POST /v1/jobs/{id}/run``: makes a pending job due now; any other
        state is :class:`InvalidStateError`."""
        return Job.from_json(self._request("POST", "/v1/jobs/%d/run" % job_id_of(job_id), {}))

    def delete_job(self, job_id: int) -> None:
        """``DELETE /v1/jobs/{id}``: deletes a finished job; a pending or
        running one is :class:`InvalidStateError`."""
        self._request("DELETE", "/v1/jobs/%d" % job_id_of(job_id))

    def _bulk(self, action: str, filters: Dict[str, Optional[str]]) -> BulkResult:
        return BulkResult.from_json(self._request("POST", "/v1/bulk/" + action, set_fields({}, **filters)))

    def bulk_retry(
        self, *, queue: Optional[str] = None, kind: Optional[str] = None, state: Optional[str] = None,
        tag: Optional[str] = None, group: Optional[str] = None,
    ) -> BulkResult:
        """``POST /v1/bulk/retry``: retries the failed and cancelled jobs
        matching every filter given (at least one)."""
        return self._bulk("retry", dict(queue=queue, kind=kind, state=state, tag=tag, group=group))

    def bulk_cancel(
        self, *, queue: Optional[str] = None, kind: Optional[str] = None, state: Optional[str] = None,
        tag: Optional[str] = None, group: Optional[str] = None,
    ) -> BulkResult:
        """``POST /v1/bulk/cancel``: cancels the pending and running jobs
        matching every filter given (at least one)."""
        return self._bulk("cancel", dict(queue=queue, kind=kind, state=state, tag=tag, group=group))

    def bulk_delete(
        self, *, queue: Optional[str] = None, kind: Optional[str] = None, state: Optional[str] = None,
        tag: Optional[str] = None, group: Optional[str] = None,
    ) -> BulkResult:
        """``POST /v1/bulk/delete``: deletes the finished jobs matching every
        filter given (at least one)."""
        return self._bulk("delete", dict(queue=queue, kind=kind, state=state, tag=tag, group=group))

    # ---- working on jobs -------------------------------------------------

    def claim(
        self,
        worker: str,
        queues: Optional[Sequence[str]] = None,
        *,
        limit: int = 1,
        lease_seconds: Optional[float] = None,
        wait_seconds: float = 0,
    ) -> List[Job]:
        """``POST /v1/claim``: takes up to ``limit`` jobs of ``queues``
        (default ``["default"]``) for ``worker``, each with its claim
        ``token``, held for ``lease_seconds`` (server default 60) unless
        heartbeated. With ``wait_seconds`` the server answers as soon as
        something is claimable, or with no jobs when the wait ends."""
        return self._claim(worker, queues, limit, lease_seconds, wait_seconds, None)

    def _claim(
        self,
        worker: str,
        queues: Optional[Sequence[str]],
        limit: int,
        lease_seconds: Optional[float],
        wait_seconds: float,
        hook: Optional[ConnHook],
    ) -> List[Job]:
        """claim, handing the connection to hook (the Worker shuts it to end
        a long poll at once when it stops)."""
        if isinstance(queues, str):
            raise TypeError("queues must be a list of queue names, not one string")
        body = set_fields(
            {"worker": worker, "limit": limit},
            queues=None if queues is None else list(queues),
            lease_seconds=lease_seconds,
            wait_seconds=wait_seconds or None,
        )
        d = self._request("POST", "/v1/claim", body, timeout=self.timeout + float(wait_seconds), hook=hook)
        return [Job.from_json(j) for j in d["jobs"]]

    def heartbeat(self, job_id: int, token: str, lease_seconds: Optional[float] = None) -> _dt.datetime:
        """``POST /v1/jobs/{id}/heartbeat``: extends the lease to now +
        ``lease_seconds`` (server default 60) and returns its new end.
        :class:`StaleClaimError` means the job is no longer yours."""
        d = self._request(
            "POST", "/v1/jobs/%d/heartbeat" % job_id_of(job_id), set_fields({"token": token}, lease_seconds=lease_seconds)
        )
        return parse_time(d["lease_expires_at"])

    def complete(self, job_id: int, token: str, result: JSON = None) -> Job:
        """``POST /v1/jobs/{id}/complete``: the job succeeded, with
        ``result`` stored with it (None stores none). Completing again with
        the same token changes nothing; a token that is not the job's
        current claim is :class:`StaleClaimError`, and changes nothing."""
        body = set_fields({"token": token}, result=result)
        return Job.from_json(self._request("POST", "/v1/jobs/%d/complete" % job_id_of(job_id), body))

    def fail(
        self,
        job_id: int,
        token: str,
        error: str,
        *,
        stack: Optional[str] = None,
        retry_at: Optional[_dt.datetime] = None,
        discard: bool = False,
    ) -> Job:
        """``POST /v1/jobs/{id}/fail``: the attempt failed with ``error`` (and
        ``stack``), recorded in the job's errors. With attempts left the job
        is pending again at ``retry_at`` (default: the server's backoff);
        with none left, or with ``discard``, it is failed for good."""
        body = set_fields(
            {"token": token, "error": error},
            stack=stack or None,
            retry_at=None if retry_at is None else format_time(retry_at, "retry_at"),
            discard=True if discard else None,
        )
        return Job.from_json(self._request("POST", "/v1/jobs/%d/fail" % job_id_of(job_id), body))

    def release(self, job_id: int, token: str) -> Job:
        """``POST /v1/jobs/{id}/release``: gives the job back unworked: it is
        pending again at once and the attempt is not counted."""
        return Job.from_json(self._request("POST", "/v1/jobs/%d/release" % job_id_of(job_id), {"token": token}))

    def snooze(self, job_id: int, token: str, seconds: Union[float, _dt.timedelta]) -> Job:
        """``POST /v1/jobs/{id}/snooze``: the job is pending again after
        ``seconds``, the attempt not counted. Past the server's snooze limit
        it is :class:`SnoozeLimitError` and the job stays running."""
        body = {"token": token, "seconds": to_seconds(seconds, "seconds")}
        return Job.from_json(self._request("POST", "/v1/jobs/%d/snooze" % job_id_of(job_id), body))

    # ---- queues and stats -------------------------------------------------

    def queues(self) -> List[Queue]:
        """``GET /v1/queues``: every queue that has jobs or is paused."""
        return [Queue.from_json(q) for q in self._request("GET", "/v1/queues")["queues"]]

    def pause_queue(self, name: str) -> Queue:
        """``POST /v1/queues/{name}/pause``: no claim takes the queue's jobs
        once this returns; running jobs go on."""
        return Queue.from_json(self._request("POST", "/v1/queues/%s/pause" % segment(name, "queue"), {}))

    def resume_queue(self, name: str) -> Queue:
        """``POST /v1/queues/{name}/resume``."""
        return Queue.from_json(self._request("POST", "/v1/queues/%s/resume" % segment(name, "queue"), {}))

    def stats(self) -> Stats:
        """``GET /v1/stats``: job counts by queue and state."""
        return Stats.from_json(self._request("GET", "/v1/stats"))

    # ---- schedules -------------------------------------------------------

    def put_schedule(
        self,
        name: str,
        cron: str,
        kind: str,
        *,
        payload: JSON = None,
        queue: Optional[str] = None,
        priority: Optional[int] = None,
        group: Optional[str] = None,
        max_attempts: Optional[int] = None,
        time_zone: Optional[str] = None,
        catch_up: Optional[str] = None,
        paused: Optional[bool] = None,
    ) -> Schedule:
        """``PUT /v1/schedules/{name}``: creates or replaces a schedule whose
        every tick of ``cron`` (in ``time_zone``, default UTC) enqueues a
        job of ``kind``. ``catch_up`` is ``"skip"`` (default) or ``"once"``;
        ``paused`` left None keeps a stored schedule's state."""
        job = set_fields({"kind": kind}, payload=payload, queue=queue, priority=priority, group=group,
                   max_attempts=max_attempts)
        body = set_fields({"cron": cron, "job": job}, time_zone=time_zone, catch_up=catch_up, paused=paused)
        return Schedule.from_json(self._request("PUT", "/v1/schedules/%s" % segment(name, "name"), body))

    def list_schedules(self) -> List[Schedule]:
        """``GET /v1/schedules``."""
        return [Schedule.from_json(s) for s in self._request("GET", "/v1/schedules")["schedules"]]

    def get_schedule(self, name: str) -> Schedule:
        """``GET /v1/schedules/{name}``: the schedule with its latest runs."""
        return Schedule.from_json(self._request("GET", "/v1/schedules/%s" % segment(name, "name")))

    def delete_schedule(self, name: str) -> None:
        """``DELETE /v1/schedules/{name}``: the jobs it made stay."""
        self._request("DELETE", "/v1/schedules/%s" % segment(name, "name"))

    def pause_schedule(self, name: str) -> Schedule:
        """``POST /v1/schedules/{name}/pause``: stops its ticks."""
        return Schedule.from_json(self._request("POST", "/v1/schedules/%s/pause" % segment(name, "name"), {}))

    def resume_schedule(self, name: str) -> Schedule:
        """``POST /v1/schedules/{name}/resume``: goes on from the first tick
        after now."""
        return Schedule.from_json(self._request("POST", "/v1/schedules/%s/resume" % segment(name, "name"), {}))

    def run_schedule(self, name: str) -> Job:
        """``POST /v1/schedules/{name}/run``: enqueues the schedule's job due
        now and returns it; the schedule's ticks are unchanged."""
        return Job.from_json(self._request("POST", "/v1/schedules/%s/run" % segment(name, "name"), {}))

    # ---- limits ----------------------------------------------------------

    def put_limit(
        self,
        key: str,
        *,
        concurrency: Optional[int] = None,
        rate: Optional[int] = None,
        per_seconds: Optional[Union[float, _dt.timedelta]] = None,
        burst: Optional[int] = None,
        weight: Optional[int] = None,
    ) -> Limit:
        """``PUT /v1/limits/{key}``: declares or replaces the limit of a key
        or template (``customer:*``): at most ``concurrency`` of its jobs
        at once, ``rate`` starts per ``per_seconds`` (default 1) up to
        ``burst`` at once, and its ``weight`` among keys with backlogs."""
        body = set_fields(
            {},
            concurrency=concurrency,
            rate=rate,
            per_seconds=None if per_seconds is None else to_seconds(per_seconds, "per_seconds"),
            burst=burst,
            weight=weight,
        )
        return Limit.from_json(self._request("PUT", "/v1/limits/%s" % segment(key, "key"), body))

    def list_limits(self) -> List[Limit]:
        """``GET /v1/limits``: every declared limit with its keys' states."""
        return [Limit.from_json(x) for x in self._request("GET", "/v1/limits")["limits"]]

    def get_limit(self, key: str) -> Limit:
        """``GET /v1/limits/{key}``: the limit declared for exactly this key
        or template, with the keys it governs."""
        return Limit.from_json(self._request("GET", "/v1/limits/%s" % segment(key, "key")))

    def delete_limit(self, key: str) -> None:
        """``DELETE /v1/limits/{key}``."""
        self._request("DELETE", "/v1/limits/%s" % segment(key, "key"))

    def take_tokens(self, key: str, n: int = 1) -> TokenGrant:
        """``POST /v1/limits/{key}/tokens``: takes ``n`` starts from the key's
        rate, all or none, for work done outside jobs. Not granted, the
        answer says when they could be (nothing is reserved)."""
        return TokenGrant.from_json(self._request("POST", "/v1/limits/%s/tokens" % segment(key, "key"), {"n": n}))
