"""Flows: jobs enqueued together that run after other jobs
(:meth:`readpast.Client.enqueue_flow`)."""

from dataclasses import dataclass
import datetime as _dt
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from .models import JSON, JobSpec

__all__ = ["After", "FlowJob", "EDGE_POLICIES"]


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

    def to_json(self) -> Dict[str, Any]:
        """The job as an element of the body of ``POST /v1/flows``."""
        body = JobSpec(
            kind=self.kind, payload=self.payload, queue=self.queue, priority=self.priority, run_at=self.run_at,
            max_attempts=self.max_attempts, group=self.group, tags=self.tags,
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
