"""The HTTP client of the readpast API: :class:`Client`."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ._http import ConnHook, job_id_of, segment, set_fields, trace_headers
from ._transport import DEFAULT_TIMEOUT
from .batches import BatchCalls
from .errors import APIError, TransportError, error_from_response
from .flows import FlowGraph, FlowJob, Relatives
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

__all__ = ["Client", "DEFAULT_TIMEOUT", "trace_headers"]


def _limit(limit: Optional[int], most: int) -> Optional[int]:
    """A limit query parameter: None (the server's default) or an int from
    1 to most."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError("limit must be an int, not %s" % type(limit).__name__)
    if not 1 <= limit <= most:
        raise ValueError("limit must be between 1 and %d, not %d" % (most, limit))
    return limit


# The HTTP status an item's error code has when sent alone.
_ITEM_STATUS = {"stale_token": 409, "invalid_state": 409, "not_found": 404}

class Client(BatchCalls):
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

    The client keeps connections open between calls for reuse (``close``
    closes them) and may be shared by threads.
    """

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
        keys: Optional[Sequence[str]] = None,
        idempotency_key: Optional[str] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> Job:
        """``POST /v1/jobs``: enqueues one job and returns it.

        See :class:`JobSpec` for the options (``keys``, at most 4, hold
        the job to several limits at once, the first its group). With
        ``unique_key``, or with
        ``idempotency_key`` (the ``Idempotency-Key`` header: the same
        request sent again within the server's idempotency period returns
        the job the first one made), an enqueue whose key is held creates
        nothing and returns the holder with ``duplicate`` True.

        ``traceparent`` and ``tracestate`` (W3C Trace Context, sent as the
        headers of those names) put the job in the caller's trace: see
        :func:`trace_headers`.
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
            keys=keys,
        )
        headers = trace_headers(traceparent, tracestate)
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return Job.from_json(self._request("POST", "/v1/jobs", spec.to_json(), headers=headers))

    def enqueue_many(
        self,
        jobs: Iterable[Union[JobSpec, Mapping[str, Any]]],
        *,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> List[Job]:
        """``POST /v1/jobs/batch``: enqueues jobs atomically (all or none) and
        returns them in order. Each is a :class:`JobSpec` or a mapping of
        the API's enqueue fields. An error names the entry
        (``field="jobs[3].kind"``). ``traceparent`` and ``tracestate`` are
        as for :meth:`enqueue`, for every job of the batch."""
        body: List[Dict[str, Any]] = []
        for j in jobs:
            body.append(j.to_json() if isinstance(j, JobSpec) else dict(j))
        if not body:
            raise ValueError("enqueue_many needs at least one job")
        headers = trace_headers(traceparent, tracestate)
        return [Job.from_json(j) for j in self._request("POST", "/v1/jobs/batch", {"jobs": body}, headers=headers)["jobs"]]

    def enqueue_flow(
        self,
        jobs: Iterable[Union[FlowJob, Mapping[str, Any]]],
        *,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> List[Job]:
        """``POST /v1/flows``: enqueues a flow, jobs that run after other
        jobs, atomically (all or none), and returns them in order: those
        with edges ``blocked``, the others ``pending``. Each is a
        :class:`FlowJob` or a mapping of the API's flow job fields::

            extract, render = client.enqueue_flow([
                FlowJob("extract", {"file": "a.csv"}, ref="extract"),
                FlowJob("render", after=["extract", After(job_id=42, policy="hold_child")]),
            ])

        A blocked job becomes pending once every job it runs after has
        succeeded; when one ends without succeeding, the edge's policy
        applies (see :data:`readpast.EDGE_POLICIES`). An error names the
        entry (``field="jobs[1].after[0].ref"``); a ``job_id`` no job has
        raises :class:`NotFoundError`, one whose job has finished
        :class:`InvalidStateError`, naming the job. ``traceparent`` and
        ``tracestate`` are as for :meth:`enqueue`, for every job of the
        flow."""
        body: List[Dict[str, Any]] = []
        for j in jobs:
            body.append(j.to_json() if isinstance(j, FlowJob) else dict(j))
        if not body:
            raise ValueError("enqueue_flow needs at least one job")
        headers = trace_headers(traceparent, tracestate)
        return [Job.from_json(j) for j in self._request("POST", "/v1/flows", {"jobs": body}, headers=headers)["jobs"]]

    # ---- jobs ------------------------------------------------------------

    def get_job(self, job_id: int) -> Job:
        """``GET /v1/jobs/{id}``."""
        return Job.from_json(self._request("GET", "/v1/jobs/%d" % job_id_of(job_id)))

    def relatives(self, job_id: int, *, limit: Optional[int] = None) -> Relatives:
        """``GET /v1/jobs/{id}/relatives``: the jobs the job runs after
        (``parents``) and those that run after it (``children``), each in
        id order with its :class:`Edge`, at most ``limit`` of each (1 to
        1000, server default 100). A job outside flows has none; an
        unknown id raises :class:`NotFoundError`."""
        d = self._request("GET", "/v1/jobs/%d/relatives" % job_id_of(job_id), query={"limit": _limit(limit, 1000)})
        return Relatives.from_json(d)

    def flow_graph(self, job_id: int, *, limit: Optional[int] = None) -> FlowGraph:
        """``GET /v1/jobs/{id}/flow``: the jobs connected to the job by
        edges, in either direction, breadth first from it, at most
        ``limit`` (1 to 2000, the server's default), and the edges between
        them; ``truncated`` when the graph holds more. An unknown id raises
        :class:`NotFoundError`."""
        d = self._request("GET", "/v1/jobs/%d/flow" % job_id_of(job_id), query={"limit": _limit(limit, 2000)})
        return FlowGraph.from_json(d)

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

    def cancel_job(self, job_id: int, token: Optional[str] = None) -> Job:
        """``POST /v1/jobs/{id}/cancel``: cancels a pending or running job
        (a running job's claim token goes stale); a finished job is
        :class:`InvalidStateError`. With ``token``, a claim token, the job
        is cancelled only while that token is its current claim (a worker
        cancelling the job it runs): after its lease expired and it was
        rescued, or once it finished, it is :class:`StaleClaimError` and
        nothing changes."""
        body = {} if token is None else {"token": token}
        return Job.from_json(self._request("POST", "/v1/jobs/%d/cancel" % job_id_of(job_id), body))

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
        parent_results: bool = False,
    ) -> List[Job]:
        """``POST /v1/claim``: takes up to ``limit`` jobs of ``queues``
        (default ``["default"]``) for ``worker``, each with its claim
        ``token``, held for ``lease_seconds`` (server default 60) unless
        heartbeated. With ``wait_seconds`` the server answers as soon as
        something is claimable, or with no jobs when the wait ends. With
        ``parent_results`` each job that runs after others carries its
        parents' results (:attr:`Job.parent_results`); the server reads
        them in one more statement per claim, and nothing more without."""
        return self._claim(worker, queues, limit, lease_seconds, wait_seconds, None, parent_results)[0]

    def _claim(
        self,
        worker: str,
        queues: Optional[Sequence[str]],
        limit: int,
        lease_seconds: Optional[float],
        wait_seconds: float,
        hook: Optional[ConnHook],
        parent_results: bool = False,
    ) -> Tuple[List[Job], float]:
        """claim, handing the connection to hook (the Worker shuts it to end
        a long poll at once when it stops); with the jobs, how long the
        server held the claim before the claim that took them began
        (``waited_seconds``, 0 when the answer has none)."""
        if isinstance(queues, str):
            raise TypeError("queues must be a list of queue names, not one string")
        body = set_fields(
            {"worker": worker, "limit": limit},
            queues=None if queues is None else list(queues),
            lease_seconds=lease_seconds,
            wait_seconds=wait_seconds or None,
            parent_results=True if parent_results else None,
        )
        d = self._request("POST", "/v1/claim", body, timeout=self.timeout + float(wait_seconds), hook=hook,
                          empty_ok=True)
        if d is None:  # the server's empty answer to a client it saw go (the hook's half-close)
            return [], 0.0
        waited = d.get("waited_seconds")
        try:
            w = float(waited) if isinstance(waited, (int, float)) and not isinstance(waited, bool) else 0.0
        except OverflowError:  # an integer past a float
            w = 0.0
        return [Job.from_json(j) for j in d["jobs"]], w if math.isfinite(w) else 0.0

    def heartbeat(self, job_id: int, token: str, lease_seconds: Optional[float] = None, *,
                  timeout: Optional[float] = None) -> _dt.datetime:
        """``POST /v1/jobs/{id}/heartbeat``: extends the lease to now +
        ``lease_seconds`` (server default 60) and returns its new end.
        :class:`StaleClaimError` means the job is no longer yours.
        ``timeout`` bounds this request instead of the client's."""
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        d = self._request(
            "POST", "/v1/jobs/%d/heartbeat" % job_id_of(job_id), set_fields({"token": token}, lease_seconds=lease_seconds),
            timeout=timeout,
        )
        return parse_time(d["lease_expires_at"])

    def complete(self, job_id: int, token: str, result: JSON = None) -> Job:
        """``POST /v1/jobs/{id}/complete``: the job succeeded, with
        ``result`` stored with it (None stores none). Completing again with
        the same token changes nothing; a token that is not the job's
        current claim is :class:`StaleClaimError`, and changes nothing."""
        body = set_fields({"token": token}, result=result)
        return Job.from_json(self._request("POST", "/v1/jobs/%d/complete" % job_id_of(job_id), body))

    def complete_many(self, completions: Iterable[Tuple[int, str, JSON]]) -> List[Optional[APIError]]:
        """``POST /v1/jobs/complete``: completes many jobs in one request
        (one transaction on the server). ``completions`` are ``(job_id,
        token, result)`` triples. Returns one entry per completion, in
        order: None when it is done, else the error it would have raised
        alone (:class:`StaleClaimError`, :class:`NotFoundError`), with
        nothing changed for that job. A malformed batch raises
        :class:`InvalidInputError` naming the item, and completes nothing."""
        items = [set_fields({"id": job_id_of(i), "token": t}, result=r) for i, t, r in completions]
        if not items:
            return []
        d = self._request("POST", "/v1/jobs/complete", {"jobs": items})
        out: List[Optional[APIError]] = []
        for r in d["results"]:
            if r.get("ok"):
                out.append(None)
                continue
            err = r.get("error") or {}
            code = str(err.get("code", "http_error"))
            out.append(error_from_response(_ITEM_STATUS.get(code, 400), code, str(err.get("message", "")),
                                           err.get("field")))
        return out

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

    def release(self, job_id: int, token: str, *, timeout: Optional[float] = None) -> Job:
        """``POST /v1/jobs/{id}/release``: gives the job back unworked: it is
        pending again at once and the attempt is not counted. ``timeout``
        overrides the client's for this request."""
        return Job.from_json(self._request("POST", "/v1/jobs/%d/release" % job_id_of(job_id), {"token": token},
                                           timeout=timeout))

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
