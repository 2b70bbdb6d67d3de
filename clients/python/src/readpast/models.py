"""The values the readpast API sends and takes, as typed Python objects.

Times are timezone-aware :class:`datetime.datetime` objects in UTC. Each
object keeps the JSON it was made from in ``raw``, so that a field this
client does not know yet is still at hand.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

__all__ = [
    "AttemptError",
    "Job",
    "JobPage",
    "JobSpec",
    "StateCounts",
    "Queue",
    "Stats",
    "ScheduleJob",
    "ScheduleRun",
    "Schedule",
    "KeyState",
    "Limit",
    "TokenGrant",
    "BulkResult",
    "ServerInfo",
    "parse_time",
    "format_time",
    "to_seconds",
]

JSON = Any
"""Any value :func:`json.dumps` can write."""

_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_time(value: str) -> _dt.datetime:
    """Parses an RFC 3339 time as the server writes it
    (``2025-06-01T12:00:00.168966Z``, with 0 to 9 fraction digits) into an
    aware datetime in UTC. Digits past microseconds are dropped."""
    m = _TIME.match(value)
    if m is None:
        raise ValueError("not an RFC 3339 time: %r" % (value,))
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    frac = (m.group(7) or "")[:6].ljust(6, "0")
    zone = m.group(8)
    if zone in ("Z", "z"):
        tz = _dt.timezone.utc
    else:
        sign = -1 if zone[0] == "-" else 1
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    t = _dt.datetime(year, month, day, hour, minute, second, int(frac), tzinfo=tz)
    return t.astimezone(_dt.timezone.utc)


def format_time(value: _dt.datetime, name: str = "time") -> str:
    """Writes an aware datetime as RFC 3339 in UTC. A naive datetime is a
    ValueError naming ``name``: it does not say which instant it means."""
    if not isinstance(value, _dt.datetime):
        raise TypeError("%s must be a datetime, not %s" % (name, type(value).__name__))
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(
            "%s must be timezone-aware (datetime.now(timezone.utc), or .replace(tzinfo=...))" % name
        )
    return value.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _list(d: Mapping[str, Any], key: str) -> List[Any]:
    """d[key] as a list: [] when it is missing or null."""
    v: Optional[List[Any]] = d.get(key)
    return list(v) if v else []


def _dict(d: Mapping[str, Any], key: str) -> Dict[str, Any]:
    """d[key] as a dict: {} when it is missing or null."""
    v: Optional[Dict[str, Any]] = d.get(key)
    return dict(v) if v else {}


def _time(d: Mapping[str, Any], key: str) -> Optional[_dt.datetime]:
    v = d.get(key)
    return None if v is None else parse_time(v)


def to_seconds(value: Union[float, int, _dt.timedelta], name: str = "duration") -> float:
    """A duration in seconds, from a number or a timedelta; a TypeError
    naming name for anything else."""
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number of seconds or a timedelta, not %s" % (name, type(value).__name__))
    return float(value)


@dataclass(frozen=True)
class AttemptError:
    """One failed attempt of a job."""

    attempt: int
    at: _dt.datetime
    message: str
    stack: Optional[str] = None
    worker: Optional[str] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "AttemptError":
        return cls(
            attempt=int(d["attempt"]),
            at=parse_time(d["at"]),
            message=d.get("message", ""),
            stack=d.get("stack"),
            worker=d.get("worker"),
        )


@dataclass(frozen=True)
class Job:
    """A job, live or finished, as the server has it.

    ``token`` is set only on the jobs :meth:`Client.claim` returns: the
    claim token that completes, fails, heartbeats, snoozes or releases the
    job. ``payload``, ``result`` and ``errors`` are None, None and empty in
    a summary listing. ``duplicate`` is True only on an enqueue answer
    whose unique key was held: nothing was created, this is the holder.
    ``traceparent`` and ``tracestate`` are the job's creation context (W3C
    Trace Context), None for a job enqueued outside any trace: the enqueue
    and claim answers carry them, and a worker's ``on_process`` hook makes
    the attempt's span a child of them. ``parent_results`` is set only on
    the jobs of a claim that asked for it (``parent_results=True``) that
    run after other jobs: each parent's stored result by the parent's ref
    in the flow (a parent named by id, or without a ref, by its id as a
    string), None for a parent that has not succeeded or stored no result.
    ``keys`` lists every flow-control key of the job, its ``group`` first
    (``[group]`` for a job with a group and no other key), and is empty
    for a job without keys.
    """

    id: int
    queue: str
    kind: str
    state: str
    priority: int
    attempt: int
    max_attempts: int
    run_at: _dt.datetime
    created_at: _dt.datetime
    payload: JSON = None
    group: Optional[str] = None
    errors: List[AttemptError] = field(default_factory=list)
    tags: List[str] = field(default_factory=list)
    snoozes: int = 0
    worker: Optional[str] = None
    started_at: Optional[_dt.datetime] = None
    finished_at: Optional[_dt.datetime] = None
    lease_expires_at: Optional[_dt.datetime] = None
    result: JSON = None
    unique_key: Optional[str] = None
    unique_until: Optional[_dt.datetime] = None
    duplicate: bool = False
    token: Optional[str] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    parent_results: Optional[Dict[str, JSON]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    keys: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Job":
        return cls(
            id=int(d["id"]),
            queue=d["queue"],
            kind=d["kind"],
            state=d["state"],
            priority=int(d.get("priority", 0)),
            attempt=int(d.get("attempt", 0)),
            max_attempts=int(d.get("max_attempts", 0)),
            run_at=parse_time(d["run_at"]),
            created_at=parse_time(d["created_at"]),
            payload=d.get("payload"),
            group=d.get("group"),
            keys=[str(k) for k in _list(d, "keys")],
            errors=[AttemptError.from_json(e) for e in _list(d, "errors")],
            tags=[str(t) for t in _list(d, "tags")],
            snoozes=int(d.get("snoozes", 0)),
            worker=d.get("worker"),
            started_at=_time(d, "started_at"),
            finished_at=_time(d, "finished_at"),
            lease_expires_at=_time(d, "lease_expires_at"),
            result=d.get("result"),
            unique_key=d.get("unique_key"),
            unique_until=_time(d, "unique_until"),
            duplicate=bool(d.get("duplicate", False)),
            token=d.get("token"),
            traceparent=d.get("traceparent"),
            tracestate=d.get("tracestate"),
            parent_results=_parent_results(d),
            raw=dict(d),
        )


def _parent_results(d: Mapping[str, Any]) -> Optional[Dict[str, JSON]]:
    """The parent_results object of a claimed job, or None."""
    v = d.get("parent_results")
    if v is None:
        return None
    if not isinstance(v, Mapping):
        raise ValueError("parent_results must be an object, not %s" % type(v).__name__)
    return dict(v)


@dataclass(frozen=True)
class JobPage:
    """One page of :meth:`Client.list_jobs`: jobs newest first, and the
    cursor of the next page (None on the last)."""

    jobs: List[Job]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class JobSpec:
    """One job to enqueue, for :meth:`Client.enqueue_many` (and what
    :meth:`Client.enqueue` builds from its arguments).

    Only ``kind`` is required; everything left None takes the server's
    default: queue ``default``, payload ``{}``, priority 0 (-1000 to 1000,
    lower runs first), due now, 25 attempts, no group, no unique key, no
    tags. ``run_at`` is an aware datetime, or a timedelta from now (on this
    machine's clock). ``unique_for`` (seconds or a timedelta) keeps
    ``unique_key`` held that long after the enqueue whatever the outcome.
    ``keys`` (at most 4 names) holds the job to the limit of each: it
    starts only when every key allows it, and counts as running on each.
    The first key is its group (its stream: turns and order); ``group``
    alone is the same as ``keys=[group]``, and given with ``keys`` must be
    its first.
    """

    kind: str
    payload: JSON = None
    queue: Optional[str] = None
    priority: Optional[int] = None
    run_at: Optional[Union[_dt.datetime, _dt.timedelta]] = None
    max_attempts: Optional[int] = None
    group: Optional[str] = None
    unique_key: Optional[str] = None
    unique_for: Optional[Union[float, _dt.timedelta]] = None
    tags: Optional[Sequence[str]] = None
    keys: Optional[Sequence[str]] = None

    def to_json(self) -> Dict[str, Any]:
        """The enqueue body of this job. Raises TypeError or ValueError on
        values no server would take as they are (a naive run_at, a tags
        string instead of a list); the server checks the rest."""
        if not isinstance(self.kind, str):
            raise TypeError("kind must be a str, not %s" % type(self.kind).__name__)
        body: Dict[str, Any] = {"kind": self.kind}
        if self.payload is not None:
            body["payload"] = self.payload
        if self.queue is not None:
            body["queue"] = self.queue
        if self.priority is not None:
            body["priority"] = self.priority
        if self.run_at is not None:
            run_at = self.run_at
            if isinstance(run_at, _dt.timedelta):
                run_at = _dt.datetime.now(_dt.timezone.utc) + run_at
            body["run_at"] = format_time(run_at, "run_at")
        if self.max_attempts is not None:
            body["max_attempts"] = self.max_attempts
        if self.group is not None:
            body["group"] = self.group
        if self.keys is not None:
            if isinstance(self.keys, (str, bytes)):
                raise TypeError("keys must be a list of strings, not one string")
            body["keys"] = list(self.keys)
        if self.unique_key is not None:
            body["unique_key"] = self.unique_key
        if self.unique_for is not None:
            body["unique_for_seconds"] = to_seconds(self.unique_for, "unique_for")
        if self.tags is not None:
            if isinstance(self.tags, (str, bytes)):
                raise TypeError("tags must be a list of strings, not one string")
            body["tags"] = list(self.tags)
        return body


@dataclass(frozen=True)
class StateCounts:
    """How many jobs are in each state (``blocked``: jobs of flows
    waiting for the jobs they run after)."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    blocked: int = 0

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> "StateCounts":
        d = d or {}
        return cls(
            pending=int(d.get("pending", 0)),
            running=int(d.get("running", 0)),
            succeeded=int(d.get("succeeded", 0)),
            failed=int(d.get("failed", 0)),
            cancelled=int(d.get("cancelled", 0)),
            blocked=int(d.get("blocked", 0)),
        )


@dataclass(frozen=True)
class Queue:
    """A queue: its pause and its jobs' counts by state."""

    name: str
    paused: bool
    paused_at: Optional[_dt.datetime]
    counts: StateCounts
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Queue":
        return cls(
            name=d["name"],
            paused=bool(d.get("paused", False)),
            paused_at=_time(d, "paused_at"),
            counts=StateCounts.from_json(d.get("counts")),
            raw=dict(d),
        )


@dataclass(frozen=True)
class Stats:
    """Counts by queue and state, their totals, and the paused queues."""

    queues: Dict[str, StateCounts]
    totals: StateCounts
    paused: List[str]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Stats":
        return cls(
            queues={str(k): StateCounts.from_json(v) for k, v in _dict(d, "queues").items()},
            totals=StateCounts.from_json(d.get("totals")),
            paused=[str(q) for q in _list(d, "paused")],
        )


@dataclass(frozen=True)
class ScheduleJob:
    """The job each tick of a schedule enqueues."""

    kind: str
    queue: str = "default"
    payload: JSON = None
    priority: int = 0
    group: Optional[str] = None
    max_attempts: int = 25

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ScheduleJob":
        return cls(
            kind=d["kind"],
            queue=d.get("queue", "default"),
            payload=d.get("payload"),
            priority=int(d.get("priority", 0)),
            group=d.get("group"),
            max_attempts=int(d.get("max_attempts", 25)),
        )


@dataclass(frozen=True)
class ScheduleRun:
    """One tick of a schedule and the job it made."""

    tick: _dt.datetime
    job_id: int
    created_at: _dt.datetime
    catch_up: bool = False

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ScheduleRun":
        return cls(
            tick=parse_time(d["tick"]),
            job_id=int(d["job_id"]),
            created_at=parse_time(d["created_at"]),
            catch_up=bool(d.get("catch_up", False)),
        )


@dataclass(frozen=True)
class Schedule:
    """A stored schedule. ``runs`` (the latest ticks, newest first) is
    filled by :meth:`Client.get_schedule` only."""

    name: str
    cron: str
    time_zone: str
    catch_up: str
    paused: bool
    job: ScheduleJob
    next_run_at: Optional[_dt.datetime]
    last_run_at: Optional[_dt.datetime]
    last_job_id: Optional[int]
    created_at: _dt.datetime
    updated_at: _dt.datetime
    runs: List[ScheduleRun] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Schedule":
        last = d.get("last_job_id")
        return cls(
            name=d["name"],
            cron=d["cron"],
            time_zone=d.get("time_zone", "UTC"),
            catch_up=d.get("catch_up", "skip"),
            paused=bool(d.get("paused", False)),
            job=ScheduleJob.from_json(d["job"]),
            next_run_at=_time(d, "next_run_at"),
            last_run_at=_time(d, "last_run_at"),
            last_job_id=None if last is None else int(last),
            created_at=parse_time(d["created_at"]),
            updated_at=parse_time(d["updated_at"]),
            runs=[ScheduleRun.from_json(r) for r in _list(d, "runs")],
            raw=dict(d),
        )


@dataclass(frozen=True)
class KeyState:
    """A key a limit governs, as a claim would see it now: its running
    jobs, its bound, the starts its rate allows now (-1 without a rate)
    and when it next allows one (None when it does now)."""

    key: str
    running: int
    concurrency: int
    tokens: int
    limit: Optional[str] = None
    next_start: Optional[_dt.datetime] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "KeyState":
        return cls(
            key=d["key"],
            running=int(d.get("running", 0)),
            concurrency=int(d.get("concurrency", 0)),
            tokens=int(d.get("tokens", -1)),
            limit=d.get("limit") or None,
            next_start=_time(d, "next_start"),
        )


@dataclass(frozen=True)
class Limit:
    """A limit declared for a key or a template (``customer:*``): running
    jobs at once (0: no bound), ``rate`` starts per ``per_seconds`` (0: no
    rate) up to ``burst`` at once, and the key's ``weight``. ``keys`` holds
    the keys it governs that ran or were limited lately."""

    key: str
    concurrency: int
    rate: int
    per_seconds: float
    burst: int
    weight: int
    keys: List[KeyState] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Limit":
        return cls(
            key=d["key"],
            concurrency=int(d.get("concurrency", 0)),
            rate=int(d.get("rate", 0)),
            per_seconds=float(d.get("per_seconds", 0)),
            burst=int(d.get("burst", 0)),
            weight=int(d.get("weight", 1)),
            keys=[KeyState.from_json(k) for k in _list(d, "keys")],
            raw=dict(d),
        )


@dataclass(frozen=True)
class TokenGrant:
    """The answer of :meth:`Client.take_tokens`: whether the tokens were
    taken, and if not the earliest time they could be (nothing is
    reserved: ask again then)."""

    granted: bool
    retry_at: Optional[_dt.datetime]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TokenGrant":
        return cls(granted=bool(d["granted"]), retry_at=_time(d, "retry_at"))


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: how many jobs it changed, and the ids of the
    jobs it matched and skipped because other transactions held them
    (send the action again to act on them)."""

    count: int
    skipped: List[int]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "BulkResult":
        return cls(count=int(d["count"]), skipped=[int(i) for i in _list(d, "skipped")])


@dataclass(frozen=True)
class ServerInfo:
    """Which server answered: its name, version, VCS revision and Go
    version."""

    name: str
    version: str
    revision: str
    go_version: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ServerInfo":
        return cls(
            name=d.get("name", ""),
            version=d.get("version", ""),
            revision=d.get("revision", ""),
            go_version=d.get("go_version", ""),
        )
