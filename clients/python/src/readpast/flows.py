"""Flows: jobs enqueued together that run after other jobs
(:meth:`readpast.Client.enqueue_flow`), and what the server tells of them
(:meth:`readpast.Client.relatives`, :meth:`readpast.Client.flow_graph`)."""

from dataclasses import dataclass
import datetime as _dt
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from .models import JSON, Job, JobSpec

__all__ = ["After", "FlowJob", "EDGE_POLICIES", "Edge", "Relative", "Relatives", "FlowGraph"]


EDGE_POLICIES = ("cancel_child", "run_anyway", "hold_child")
"""What becomes of a flow's job when a job it runs after ends without
succeeding (failed for good, cancelled): ``cancel_child`` (the default)
cancels it, ``run_anyway`` counts the edge as satisfied, ``hold_child``
keeps it blocked until that parent is retried and succeeds (or the job is
cancelled)."""


@dataclass(frozen=True)
class After:
    """One edge of a :class:`FlowJob`: the job it runs after, by the
    ``ref`` of a job of the same flow or by the ``job_id`` of a job
    enqueued before (exactly one of the two; that job must be blocked,
    pending or running), and the ``policy`` (one of
    :data:`EDGE_POLICIES`; None for the server's default,
    ``cancel_child``)."""

    ref: Optional[str] = None
    job_id: Optional[int] = None
    policy: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        """The edge as the API takes it. Raises TypeError or ValueError
        on an edge no server would take (both or neither of ref and
        job_id, an unknown policy); the server checks the rest."""
        if (self.ref is None) == (self.job_id is None):
            raise ValueError("an edge names its parent by exactly one of ref and job_id")
        body: Dict[str, Any] = {}
        if self.ref is not None:
            if not isinstance(self.ref, str):
                raise TypeError("ref must be a str, not %s" % type(self.ref).__name__)
            body["ref"] = self.ref
        if self.job_id is not None:
            if isinstance(self.job_id, bool) or not isinstance(self.job_id, int):
                raise TypeError("job_id must be an int, not %s" % type(self.job_id).__name__)
            body["job_id"] = self.job_id
        if self.policy is not None:
            if self.policy not in EDGE_POLICIES:
                raise ValueError("policy must be one of %s, not %r" % (", ".join(EDGE_POLICIES), self.policy))
            body["policy"] = self.policy
        return body


def _edge_json(a: Union["After", str, int, Mapping[str, Any]]) -> Dict[str, Any]:
    """An entry of FlowJob.after as the API takes it: an After, a ref (a
    str), a job id (an int) or a mapping of the API's edge fields."""
    if isinstance(a, After):
        return a.to_json()
    if isinstance(a, str):
        return After(ref=a).to_json()
    if isinstance(a, int) and not isinstance(a, bool):
        return After(job_id=a).to_json()
    if isinstance(a, Mapping):
        return dict(a)
    raise TypeError("an entry of after must be an After, a ref (str), a job id (int) or a mapping, not %s" % type(a).__name__)


@dataclass(frozen=True)
class FlowJob:
    """One job of a flow, for :meth:`Client.enqueue_flow`: the options of
    :class:`JobSpec` but the unique key ones, a ``ref`` that the other
    jobs of the flow name it by, and ``after``, the jobs it runs after.
    Each entry of ``after`` is an :class:`After`, a ref (a str), a job id
    (an int) or a mapping of the API's edge fields. A job with entries in
    ``after`` is stored ``blocked`` until they have succeeded (or ended
    otherwise, as each edge's policy says)."""

    kind: str
    payload: JSON = None
    ref: Optional[str] = None
    after: Sequence[Union[After, str, int, Mapping[str, Any]]] = ()
    queue: Optional[str] = None
    priority: Optional[int] = None
    run_at: Optional[Union[_dt.datetime, _dt.timedelta]] = None
    max_attempts: Optional[int] = None
    group: Optional[str] = None
    tags: Optional[Sequence[str]] = None
    keys: Optional[Sequence[str]] = None

    def to_json(self) -> Dict[str, Any]:
        """The job as an element of the body of ``POST /v1/flows``."""
        body = JobSpec(
            kind=self.kind, payload=self.payload, queue=self.queue, priority=self.priority, run_at=self.run_at,
            max_attempts=self.max_attempts, group=self.group, tags=self.tags, keys=self.keys,
        ).to_json()
        if self.ref is not None:
            if not isinstance(self.ref, str):
                raise TypeError("ref must be a str, not %s" % type(self.ref).__name__)
            body["ref"] = self.ref
        if isinstance(self.after, (str, bytes, Mapping, After)):
            raise TypeError("after must be a list of edges, not one")
        edges = [_edge_json(a) for a in self.after]
        if edges:
            body["after"] = edges
        return body


@dataclass(frozen=True)
class Edge:
    """One stored edge of a flow: ``child_id`` runs after ``parent_id``.
    ``parent_ref`` and ``child_ref`` are the refs the two jobs had in the
    flow that stored the edge (None where a job had none, or was named by
    id). ``state`` is ``open`` (the parent has not ended), ``held`` (it
    ended without succeeding and holds the child until it is retried and
    succeeds) or ``done``."""

    parent_id: int
    child_id: int
    policy: str
    state: str
    parent_ref: Optional[str] = None
    child_ref: Optional[str] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Edge":
        return cls(
            parent_id=int(d["parent_id"]), child_id=int(d["child_id"]), policy=d["policy"], state=d["state"],
            parent_ref=d.get("parent_ref"), child_ref=d.get("child_ref"),
        )


@dataclass(frozen=True)
class Relative:
    """A job at the other end of one of a job's edges, with the edge.
    ``job`` is None when its row is gone (a finished job pruned or deleted
    since)."""

    edge: Edge
    job: Optional[Job]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Relative":
        job = d.get("job")
        return cls(edge=Edge.from_json(d["edge"]), job=None if job is None else Job.from_json(job))


@dataclass(frozen=True)
class Relatives:
    """What :meth:`Client.relatives` returns: the jobs a job runs after
    (``parents``) and those that run after it (``children``), each in id
    order."""

    parents: List[Relative]
    children: List[Relative]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Relatives":
        return cls(
            parents=[Relative.from_json(r) for r in d["parents"]],
            children=[Relative.from_json(r) for r in d["children"]],
        )


@dataclass(frozen=True)
class FlowGraph:
    """What :meth:`Client.flow_graph` returns: the jobs connected to a job
    by edges, in either direction, breadth first from it (the job itself
    first), and the edges between them. ``truncated`` is True when the
    graph holds more jobs than listed."""

    jobs: List[Job]
    edges: List[Edge]
    truncated: bool

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FlowGraph":
        return cls(
            jobs=[Job.from_json(j) for j in d["jobs"]],
            edges=[Edge.from_json(e) for e in d["edges"]],
            truncated=bool(d["truncated"]),
        )
