"""Batches: jobs that join over time, in any number of calls, and a
finishing job that runs once the batch is sealed and every member has
ended (:meth:`Client.open_batch`, :meth:`Client.add_to_batch`,
:meth:`Client.seal_batch`, :meth:`Client.batch`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from ._http import job_id_of, trace_headers
from ._transport import Transport
from .models import Job, JobSpec

__all__ = ["Batch", "BatchCalls"]

BatchJob = Union[JobSpec, Mapping[str, Any]]
"""A job of a batch (its finishing job or a member): a :class:`JobSpec`,
or a mapping of the API's enqueue fields, without a unique key."""


def _batch_job(job: BatchJob, name: str) -> Dict[str, Any]:
    """A job of a batch as the API takes it; a TypeError naming name for
    anything but a JobSpec or a mapping. The server refuses a unique key
    (:class:`InvalidInputError` naming the field) and checks the rest."""
    if isinstance(job, JobSpec):
        return job.to_json()
    if isinstance(job, Mapping):
        return dict(job)
    raise TypeError("%s must be a JobSpec or a mapping of enqueue fields, not %s" % (name, type(job).__name__))


@dataclass(frozen=True)
class Batch:
    """A batch as the server has it. ``id`` is its finishing job's id.
    ``sealed`` is True once no job can join: sealed, or its finishing job
    has ended (cancelled by an operator, or by a member of an
    ``on_success`` batch that did not succeed). ``members`` counts the
    jobs that joined (less those pruned from history since): ``live``
    those still blocked, pending or running, ``succeeded``, ``failed``
    and ``cancelled`` how the others ended."""

    id: int
    on_success: bool
    sealed: bool
    finisher: Job
    members: int = 0
    live: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Batch":
        return cls(
            id=int(d["id"]),
            on_success=bool(d["on_success"]),
            sealed=bool(d["sealed"]),
            finisher=Job.from_json(d["finisher"]),
            members=int(d.get("members", 0)),
            live=int(d.get("live", 0)),
            succeeded=int(d.get("succeeded", 0)),
            failed=int(d.get("failed", 0)),
            cancelled=int(d.get("cancelled", 0)),
            raw=dict(d),
        )


class BatchCalls(Transport):
    """The batch calls of :class:`Client`."""

    def open_batch(
        self,
        finisher: BatchJob,
        on_success: bool = False,
        *,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> Batch:
        """``POST /v1/batches``: opens a batch and returns it. ``finisher``
        is its finishing job, a :class:`JobSpec` or a mapping of the
        enqueue fields (no unique key): it is stored ``blocked``, and its
        id is the batch's::

            b = client.open_batch(JobSpec("notify", {"to": "ops"}))
            client.add_to_batch(b.id, [JobSpec("thumbnail", {"file": "a.png"})])  # as often as needed
            client.seal_batch(b.id)
            # in the "notify" handler: client.batch(ctx.id) counts the members

        By default the finishing job runs once the batch is sealed and
        every member has ended, whatever their outcomes. With
        ``on_success`` it runs only if every member succeeds: a member
        that fails for good or is cancelled cancels it at once.
        ``traceparent`` and ``tracestate`` are as for :meth:`enqueue`."""
        if not isinstance(on_success, bool):
            raise TypeError("on_success must be a bool, not %s" % type(on_success).__name__)
        body: Dict[str, Any] = {"finisher": _batch_job(finisher, "finisher")}
        if on_success:
            body["on_success"] = True
        headers = trace_headers(traceparent, tracestate)
        return Batch.from_json(self._request("POST", "/v1/batches", body, headers=headers))

    def add_to_batch(
        self,
        batch_id: int,
        jobs: Iterable[BatchJob],
        *,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> List[Job]:
        """``POST /v1/batches/{id}/jobs``: enqueues jobs into the batch,
        all or none (1 to the server's batch limit, at most 1000), and
        returns them in order, ``pending``. Each is a :class:`JobSpec` or
        a mapping of the enqueue fields (no unique key); an error names
        the entry (``field="jobs[1].unique_key"``). A batch that is sealed,
        or whose finishing job has ended, takes none:
        :class:`InvalidStateError`, its message saying which, nothing
        stored. An id that is no batch raises :class:`NotFoundError`.
        ``traceparent`` and ``tracestate`` are as for :meth:`enqueue`, for
        every job."""
        if isinstance(jobs, (Mapping, JobSpec, str, bytes)):
            raise TypeError("jobs must be a list of jobs, not one")
        body = [_batch_job(j, "jobs[%d]" % i) for i, j in enumerate(jobs)]
        if not body:
            raise ValueError("add_to_batch needs at least one job")
        headers = trace_headers(traceparent, tracestate)
        path = "/v1/batches/%d/jobs" % job_id_of(batch_id)
        return [Job.from_json(j) for j in self._request("POST", path, {"jobs": body}, headers=headers)["jobs"]]

    def seal_batch(self, batch_id: int) -> Batch:
        """``POST /v1/batches/{id}/seal``: no job joins the batch any more,
        and its finishing job is released once every member has ended (at
        once if none is left). Sealing a sealed batch changes nothing and
        returns the same. An id that is no batch raises
        :class:`NotFoundError`."""
        return Batch.from_json(self._request("POST", "/v1/batches/%d/seal" % job_id_of(batch_id), {}))

    def batch(self, batch_id: int) -> Batch:
        """``GET /v1/batches/{id}``: the batch, with its members counted
        by state; the finishing job reads its own (``client.batch(ctx.id)``).
        An id that is no batch (no job, or a job that finishes none) raises
        :class:`NotFoundError`."""
        return Batch.from_json(self._request("GET", "/v1/batches/%d" % job_id_of(batch_id)))
