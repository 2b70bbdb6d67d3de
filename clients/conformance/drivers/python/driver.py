"""The Python conformance driver: speaks the protocol of
clients/conformance/README.md on standard input and output, carrying out
each operation with the ``readpast`` package (clients/python/src on
PYTHONPATH). Standard library only.

    READPAST_URL=http://127.0.0.1:8080 READPAST_TOKEN=... python3 driver.py

``python3 driver.py worker QUEUE CONCURRENCY SHUTDOWN_SECONDS`` runs the
worker process of the run_worker operation: a ``readpast.Worker``.
"""

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import readpast

PROTOCOL = "readpast-conformance/1"


class DriverError(Exception):
    """An error that is not the server's: reported with status 0."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def fmt_time(t):
    return None if t is None else readpast.models.format_time(t)


def job_out(j):
    """The job as every driver reports it (README.md, "The job outcome")."""
    return {
        "id": j.id,
        "queue": j.queue,
        "kind": j.kind,
        "state": j.state,
        "priority": j.priority,
        "attempt": j.attempt,
        "max_attempts": j.max_attempts,
        "payload": j.payload,
        "group": j.group,
        "keys": list(j.keys),
        "result": j.result,
        "duplicate": j.duplicate,
        "token": j.token,
        "snoozes": j.snoozes,
        "worker": j.worker,
        "tags": list(j.tags),
        "errors": [{"attempt": e.attempt, "message": e.message} for e in j.errors],
        "run_at": fmt_time(j.run_at),
        "lease_expires_at": fmt_time(j.lease_expires_at),
        "unique_key": j.unique_key,
        "parent_results": j.parent_results,
    }


def edge_out(e):
    return {"parent_id": e.parent_id, "child_id": e.child_id, "parent_ref": e.parent_ref,
            "child_ref": e.child_ref, "policy": e.policy, "state": e.state}


def relatives_out(rs):
    return [{"edge": edge_out(r.edge), "job": None if r.job is None else job_out(r.job)} for r in rs]


def jobs_out(jobs):
    return {"jobs": [job_out(j) for j in jobs]}


def take(args, *names, required=()):
    """The arguments named, None for those left out; an unknown one is a
    mistake in the scenario."""
    unknown = set(args) - set(names) - set(required)
    if unknown:
        raise DriverError("driver_bad_args", "unknown arguments: %s" % ", ".join(sorted(unknown)))
    for r in required:
        if r not in args:
            raise DriverError("driver_bad_args", "missing argument %s" % r)
    return [args.get(n) for n in list(required) + list(names)]


def in_seconds(s):
    return None if s is None else dt.timedelta(seconds=s)


SPEC_ARGS = ("payload", "queue", "priority", "run_in_seconds", "max_attempts", "group", "unique_key",
             "unique_for_seconds", "tags", "keys")


def spec_of(args, extra=()):
    kind, payload, queue, priority, run_in, max_attempts, group, unique_key, unique_for, tags, keys, *rest = take(
        args, *SPEC_ARGS, *extra, required=("kind",))
    spec = readpast.JobSpec(kind, payload, queue=queue, priority=priority, run_at=in_seconds(run_in),
                            max_attempts=max_attempts, group=group, unique_key=unique_key,
                            unique_for=unique_for, tags=tags, keys=keys)
    return spec, rest


# The fields of a flow job and of its edges in POST /v1/flows: others are
# a mistake in the scenario.
FLOW_JOB_FIELDS = ("ref", "kind", "payload", "queue", "priority", "run_at", "max_attempts", "group", "keys", "tags",
                   "after")
FLOW_EDGE_FIELDS = ("ref", "job_id", "policy")
# The fields of a job of a batch: the enqueue fields (the unique key ones
# go as they are, for the server to refuse).
BATCH_JOB_FIELDS = ("kind", "payload", "queue", "priority", "run_at", "max_attempts", "group", "keys", "tags",
                    "unique_key", "unique_for_seconds")


def batch_job(j, where):
    """A job of a batch as the scenario wrote it: a mapping, passed to the
    library as it is."""
    if not isinstance(j, dict):
        raise DriverError("driver_bad_args", "%s must be an object" % where)
    unknown = set(j) - set(BATCH_JOB_FIELDS)
    if unknown:
        raise DriverError("driver_bad_args", "%s: unknown fields: %s" % (where, ", ".join(sorted(unknown))))
    return j


def batch_out(b):
    return {"id": b.id, "on_success": b.on_success, "sealed": b.sealed, "finisher": job_out(b.finisher),
            "members": b.members, "live": b.live, "succeeded": b.succeeded, "failed": b.failed,
            "cancelled": b.cancelled}


class Driver:
    def __init__(self, url, token):
        self.url, self.token = url, token
        self.c = readpast.Client(url, token=token)

    def op_enqueue(self, a):
        spec, (idem,) = spec_of(a, ("idempotency_key",))
        return job_out(self.c.enqueue(spec.kind, spec.payload, queue=spec.queue, priority=spec.priority,
                                      run_at=spec.run_at, max_attempts=spec.max_attempts, group=spec.group,
                                      unique_key=spec.unique_key, unique_for=spec.unique_for, tags=spec.tags,
                                      keys=spec.keys, idempotency_key=idem))

    def op_enqueue_batch(self, a):
        (jobs,) = take(a, required=("jobs",))
        return jobs_out(self.c.enqueue_many([spec_of(j)[0] for j in jobs]))

    def op_enqueue_flow(self, a):
        """The body's jobs as they are: enqueue_flow takes mappings of the
        API's flow job fields (and of its edge fields in ``after``)."""
        (jobs,) = take(a, required=("jobs",))
        if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
            raise DriverError("driver_bad_args", "jobs must be a list of objects")
        for i, j in enumerate(jobs):
            unknown = set(j) - set(FLOW_JOB_FIELDS)
            edges = j.get("after") or []
            if isinstance(edges, list):
                for k, e in enumerate(edges):
                    if isinstance(e, dict):
                        unknown |= {"after[%d].%s" % (k, f) for f in set(e) - set(FLOW_EDGE_FIELDS)}
            if unknown:
                raise DriverError("driver_bad_args", "jobs[%d]: unknown fields: %s" % (i, ", ".join(sorted(unknown))))
        return jobs_out(self.c.enqueue_flow(jobs))

    def op_claim(self, a):
        worker, queues, limit, lease, wait, parents = take(a, "queues", "limit", "lease_seconds", "wait_seconds",
                                                           "parent_results", required=("worker",))
        return jobs_out(self.c.claim(worker, queues, limit=1 if limit is None else limit, lease_seconds=lease,
                                     wait_seconds=wait or 0, parent_results=bool(parents)))

    def op_complete(self, a):
        job_id, token, result = take(a, "result", required=("id", "token"))
        return job_out(self.c.complete(job_id, token, result))

    def op_fail(self, a):
        job_id, token, error, retry_in, discard = take(a, "retry_in_seconds", "discard",
                                                       required=("id", "token", "error"))
        retry_at = None
        if retry_in is not None:
            retry_at = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=retry_in)
        return job_out(self.c.fail(job_id, token, error, retry_at=retry_at, discard=bool(discard)))

    def op_heartbeat(self, a):
        job_id, token, lease = take(a, "lease_seconds", required=("id", "token"))
        return {"lease_expires_at": fmt_time(self.c.heartbeat(job_id, token, lease))}

    def op_release(self, a):
        job_id, token = take(a, required=("id", "token"))
        return job_out(self.c.release(job_id, token))

    def op_snooze(self, a):
        job_id, token, seconds = take(a, required=("id", "token", "seconds"))
        return job_out(self.c.snooze(job_id, token, seconds))

    def op_cancel(self, a):
        job_id, token = take(a, "token", required=("id",))
        return job_out(self.c.cancel_job(job_id, token=token))

    def op_retry(self, a):
        (job_id,) = take(a, required=("id",))
        return job_out(self.c.retry_job(job_id))

    def op_get(self, a):
        (job_id,) = take(a, required=("id",))
        return job_out(self.c.get_job(job_id))

    def op_list(self, a):
        queue, state, kind, group, tag, limit = take(a, "queue", "state", "kind", "group", "tag", "limit")
        page = self.c.list_jobs(queue=queue, state=state, kind=kind, group=group, tag=tag, limit=limit)
        return {"jobs": [job_out(j) for j in page.jobs], "next_cursor": page.next_cursor}

    def op_relatives(self, a):
        job_id, limit = take(a, "limit", required=("id",))
        rel = self.c.relatives(job_id, limit=limit)
        return {"parents": relatives_out(rel.parents), "children": relatives_out(rel.children)}

    def op_flow_graph(self, a):
        job_id, limit = take(a, "limit", required=("id",))
        g = self.c.flow_graph(job_id, limit=limit)
        return {"jobs": [job_out(j) for j in g.jobs], "edges": [edge_out(e) for e in g.edges], "truncated": g.truncated}

    def op_open_batch(self, a):
        finisher, on_success = take(a, "on_success", required=("finisher",))
        return batch_out(self.c.open_batch(batch_job(finisher, "finisher"), on_success=bool(on_success)))

    def op_add_to_batch(self, a):
        batch_id, jobs = take(a, required=("id", "jobs"))
        if not isinstance(jobs, list):
            raise DriverError("driver_bad_args", "jobs must be a list")
        return jobs_out(self.c.add_to_batch(batch_id, [batch_job(j, "jobs[%d]" % i) for i, j in enumerate(jobs)]))

    def op_seal_batch(self, a):
        (batch_id,) = take(a, required=("id",))
        return batch_out(self.c.seal_batch(batch_id))

    def op_batch(self, a):
        (batch_id,) = take(a, required=("id",))
        return batch_out(self.c.batch(batch_id))

    def op_raw(self, a):
        """A request as the scenario wrote it, for bad input the client
        library would not send: urllib, not the library."""
        method, path, headers, body, body_json, pad = take(a, "headers", "body", "body_json", "pad",
                                                           required=("method", "path"))
        data = None
        if body is not None:
            if pad is not None:
                body = body.replace(pad["marker"], pad["unit"] * pad["count"], 1)
            data = body.encode("utf-8")
        elif body_json is not None:
            data = json.dumps(body_json).encode("utf-8")
        req = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                raise DriverError("http_error", raw.decode("utf-8", "replace")) from None
            raise readpast.errors.error_from_response(e.code, err["code"], err.get("message", ""),
                                                      err.get("field"), None) from None
        return {"status": status, "body": json.loads(raw) if raw else None}

    def op_long_poll(self, a):
        worker, queue, kind, wait, after, lease = take(a, "lease_seconds", required=(
            "worker", "queue", "kind", "wait_seconds", "enqueue_after_seconds"))
        got = {}

        def claim():
            try:
                got["jobs"] = self.c.claim(worker, [queue], wait_seconds=wait, lease_seconds=lease)
            except Exception as e:  # reported below
                got["error"] = e
            got["at"] = time.monotonic()

        t = threading.Thread(target=claim, daemon=True)
        t.start()
        t.join(after)
        if "at" in got:
            raise DriverError("driver_error", "the claim answered before the enqueue: %r" % (got,))
        sent = time.monotonic()
        job = self.c.enqueue(kind, queue=queue)
        answered = time.monotonic()
        t.join(wait + 30)
        if "error" in got:
            raise got["error"]
        if "at" not in got:
            raise DriverError("driver_error", "the claim did not answer")
        return {"jobs": [job_out(j) for j in got["jobs"]], "enqueued_id": job.id,
                "enqueue_ms": (answered - sent) * 1000.0, "wake_ms": (got["at"] - answered) * 1000.0}

    def op_run_worker(self, a):
        queue, concurrency, shutdown, wait_started, sig = take(
            a, "signal", required=("queue", "concurrency", "shutdown_seconds", "wait_started"))
        signum = {None: signal.SIGTERM, "SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}.get(sig)
        if signum is None:
            raise DriverError("driver_bad_args", "signal must be SIGTERM or SIGINT")
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "worker", queue, str(concurrency), str(shutdown)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines, errs = [], []
        readers = [threading.Thread(target=lambda: lines.extend(l.strip() for l in proc.stdout), daemon=True),
                   threading.Thread(target=lambda: errs.extend(proc.stderr), daemon=True)]
        for r in readers:
            r.start()

        def ids(word):
            return sorted(int(x.split()[1]) for x in list(lines) if x.startswith(word + " "))

        try:
            deadline = time.monotonic() + 30
            while len(ids("start")) < wait_started:
                if proc.poll() is not None:
                    raise DriverError("driver_error", "the worker exited before starting %d jobs:\n%s"
                                      % (wait_started, "".join(errs)))
                if time.monotonic() > deadline:
                    raise DriverError("driver_error", "the worker did not start %d jobs within 30s:\n%s"
                                      % (wait_started, "".join(errs)))
                time.sleep(0.01)
            signalled = time.monotonic()
            proc.send_signal(signum)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                raise DriverError("driver_error", "the worker did not exit within 60s of the signal:\n%s"
                                  % "".join(errs)) from None
            took = time.monotonic() - signalled
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdin.close()
        for r in readers:
            r.join(5)
        if code != 0:
            sys.stderr.write("worker stderr:\n" + "".join(errs))
        return {"exit_code": code, "started": ids("start"), "ended": ids("end"), "took_ms": int(took * 1000)}


def error_out(e):
    if isinstance(e, readpast.APIError):
        return {"status": e.status, "code": e.code, "field": e.field, "message": e.message}
    if isinstance(e, DriverError):
        return {"status": 0, "code": e.code, "field": None, "message": str(e)}
    if isinstance(e, readpast.TransportError):
        return {"status": 0, "code": "transport_error", "field": None, "message": str(e)}
    # The library refused the input before sending it (TypeError, ValueError).
    return {"status": 0, "code": "client_error", "field": None, "message": "%s: %s" % (type(e).__name__, e)}


def serve():
    d = Driver(os.environ.get("READPAST_URL", ""), os.environ.get("READPAST_TOKEN"))
    out = sys.stdout

    def send(obj):
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        out.flush()

    send({"hello": PROTOCOL, "driver": "python", "library": "readpast %s" % readpast.__version__})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        fn = getattr(d, "op_" + req["op"], None)
        try:
            if fn is None:
                raise DriverError("unsupported_op", "the Python driver has no operation %r" % req["op"])
            send({"seq": req["seq"], "ok": True, "value": fn(req.get("args") or {})})
        except Exception as e:  # every error is an outcome for the runner to judge
            send({"seq": req["seq"], "ok": False, "error": error_out(e)})
    return 0


def worker(queue, concurrency, shutdown):
    """A readpast.Worker running "sleep" jobs (payload {"seconds": s}),
    printing "start ID" and "end ID", until SIGTERM or SIGINT."""
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    lock = threading.Lock()

    def say(line):
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def sleep(ctx):
        say("start %d" % ctx.id)
        time.sleep(float(ctx.payload["seconds"]))
        say("end %d" % ctx.id)
        return {"slept": ctx.payload["seconds"]}

    def orphaned():
        # Standard input ends when the driver does, however it ends: the
        # worker does not outlive it.
        sys.stdin.read()
        sys.stderr.write("worker: the driver went away; exiting\n")
        os._exit(3)

    threading.Thread(target=orphaned, daemon=True).start()
    c = readpast.Client(os.environ["READPAST_URL"], token=os.environ.get("READPAST_TOKEN"))
    w = readpast.Worker(c, [queue], {"sleep": sleep}, concurrency=int(concurrency),
                        shutdown_timeout=float(shutdown), wait_seconds=5, lease_seconds=30)
    w.run()
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker(*sys.argv[2:5]))
    sys.exit(serve())
