"""The Python hop of the cross-language trace test (../trace_test.go).

Runs a readpast.Worker on one queue for one job, whose handler fails the
attempt. The worker's on_process hook makes the attempt's
"process <queue>" span as readpast's Go workers do
(docs/design/tracing.md): a consumer span whose parent is the job's
creation context (its traceparent), linked to it too, or a root span for
a job without one. There is no OpenTelemetry SDK here: the hook writes
the span as an OTLP/JSON export request and posts it to the collector
itself, with the standard library.

Environment: READPAST_URL, READPAST_TOKEN, TRACE_QUEUE (the queue),
TRACE_OTLP_URL (the collector's traces URL, .../v1/traces). Prints the
span it exported as one JSON line; exits 1 if the export failed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
import urllib.request

import readpast

SERVICE = "python-worker"
SCOPE = "readpast-trace-test"
SPAN_KIND_CONSUMER = 5
STATUS_ERROR = 2

TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def attr(key, value):
    """An OTLP/JSON KeyValue."""
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}  # int64 is a string in OTLP/JSON
    return {"key": key, "value": {"stringValue": str(value)}}


class ProcessSpan:
    """The context manager on_process returns: one attempt's span, posted
    to the collector when the handler is done."""

    def __init__(self, job, worker_name, url, exported):
        self.job = job
        self.worker_name = worker_name
        self.url = url
        self.exported = exported
        m = TRACEPARENT.match(job.traceparent or "")
        if m and m.group(1) != "0" * 32 and m.group(2) != "0" * 16:
            self.trace_id, self.parent_id = m.group(1), m.group(2)
        else:  # no creation context: a root span of a new trace
            self.trace_id, self.parent_id = secrets.token_hex(16), ""
        self.span_id = secrets.token_hex(8)
        self.start = 0

    def __enter__(self):
        self.start = time.time_ns()
        return self

    def __exit__(self, exc_type, exc, tb):
        span = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": "process " + self.job.queue,
            "kind": SPAN_KIND_CONSUMER,
            "startTimeUnixNano": str(self.start),
            "endTimeUnixNano": str(time.time_ns()),
            "attributes": [
                attr("messaging.system", "readpast"),
                attr("messaging.operation.type", "process"),
                attr("messaging.operation.name", "process"),
                attr("messaging.destination.name", self.job.queue),
                attr("messaging.message.id", str(self.job.id)),
                attr("messaging.client.id", self.worker_name),
                attr("readpast.job.attempt", self.job.attempt),
                attr("readpast.job.kind", self.job.kind),
            ],
        }
        if self.parent_id:
            span["parentSpanId"] = self.parent_id
            span["links"] = [{"traceId": self.trace_id, "spanId": self.parent_id}]
        if exc is not None:
            span["status"] = {"code": STATUS_ERROR, "message": str(exc)}
            span["events"] = [{
                "name": "exception",
                "timeUnixNano": str(time.time_ns()),
                "attributes": [attr("exception.type", type(exc).__name__), attr("exception.message", str(exc))],
            }]
        body = {"resourceSpans": [{
            "resource": {"attributes": [attr("service.name", SERVICE)]},
            "scopeSpans": [{"scope": {"name": SCOPE}, "spans": [span]}],
        }]}
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                resp.read()
        except Exception as e:  # noqa: BLE001 - reported, and the exit status says so
            print("OTLP export to %s failed: %s" % (self.url, e), file=sys.stderr)
            return False
        self.exported.append(span)
        print(json.dumps({"trace_id": self.trace_id, "span_id": self.span_id, "parent_span_id": self.parent_id,
                          "job": self.job.id, "attempt": self.job.attempt}), flush=True)
        return False  # the handler's exception goes on to fail the attempt


def main():
    queue = os.environ["TRACE_QUEUE"]
    url = os.environ["TRACE_OTLP_URL"]
    client = readpast.Client(os.environ["READPAST_URL"], token=os.environ["READPAST_TOKEN"])
    exported = []
    worker = None

    def fail(ctx):
        worker.stop()  # one job: claim no more, and return once its failure is recorded
        raise RuntimeError("attempt %d fails on purpose" % ctx.attempt)

    worker = readpast.Worker(client, [queue], {"traced": fail}, concurrency=1, wait_seconds=5,
                             shutdown_timeout=10,
                             on_process=lambda job: ProcessSpan(job, worker.name, url, exported))
    worker.run()
    return 0 if exported else 1


if __name__ == "__main__":
    sys.exit(main())
