#!/usr/bin/env python3
"""The example Python worker (examples/python-worker/worker.py, on the
readpast package), unchanged, with every call its readpast.Worker makes to
the server and every handler run recorded in a history file for the fault
suite (internal/history's format: one JSON object a line, each written
with one write(2)).

Usage: pyworker.py WORKER_PY HISTORY_FILE PROC_NAME [worker.py options...]

It adds kind "work": payload {"fail": true} fails the first attempt.

The readpast package is this checkout's (clients/python/src), whatever is
installed. The calls recorded are those of readpast.Client the Worker
makes: _claim, heartbeat, complete, complete_many (an event per job, with
its own outcome), fail, release, snooze and cancel_job. The history has no
ops for the last two: a snooze is recorded as a release (the job is
pending again, the attempt not counted, the token spent) and a cancel as a
fail (the job ends, not succeeded) under the token this process claimed
the job with.
"""

import importlib.util
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

import readpast  # noqa: E402 - after the path above


def load(path):
    spec = importlib.util.spec_from_file_location("worker", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def outcome(exc):
    """The history's outcome of a call that raised (or of a batch item)."""
    if isinstance(exc, readpast.APIError):
        if exc.status == 409:
            return "stale"
        if exc.status == 404:
            return "notfound"
        if 400 <= exc.status < 500 and exc.status != 429:
            return "refused"
    return "error"  # no answer, 5xx, 429: it may or may not have landed


def main():
    worker = load(sys.argv[1])
    fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    proc = sys.argv[3]

    def rec(**e):
        e["proc"] = proc
        os.write(fd, (json.dumps(e) + "\n").encode())

    tokens = {}  # job id -> the token this process last claimed it with
    tokens_lock = threading.Lock()

    class Recording(readpast.Client):
        def _claim(self, name, queues, limit, lease_seconds, *args, **kwargs):
            inv = time.time_ns()
            try:
                jobs, waited = super()._claim(name, queues, limit, lease_seconds, *args, **kwargs)
            except Exception as e:
                rec(op="claimcall", inv=inv, ret=time.time_ns(), out="error", err=str(e))
                raise
            ret = time.time_ns()
            rec(op="claimcall", inv=inv, ret=ret, out="ok", n=len(jobs))
            for j in jobs:
                with tokens_lock:
                    tokens[j.id] = j.token
                e = dict(op="claim", id=j.id, tok=j.token, g=j.group or "", inv=inv, ret=ret,
                         lease=int(lease_seconds * 1e9))
                if len(j.keys) > 1:
                    e["mk"] = j.keys[1:]  # the keys after the first, as history.Event.More
                rec(**e)
            return jobs, waited

        def _write(self, op, job_id, token, call, lease=0):
            inv = time.time_ns()
            if op != "extend":
                rec(op=op, id=job_id, tok=token, inv=inv, out="sent")
            try:
                r = call()
            except Exception as e:
                rec(op=op, id=job_id, tok=token, inv=inv, ret=time.time_ns(), out=outcome(e), err=str(e), lease=lease)
                raise
            rec(op=op, id=job_id, tok=token, inv=inv, ret=time.time_ns(), out="ok", lease=lease)
            return r

        def heartbeat(self, job_id, token, lease_seconds=None):
            lease = int((lease_seconds or 60) * 1e9)  # the server's default lease is 60 s
            return self._write("extend", job_id, token, lambda: super(Recording, self).heartbeat(job_id, token, lease_seconds),
                               lease)

        def complete(self, job_id, token, result=None):
            return self._write("complete", job_id, token, lambda: super(Recording, self).complete(job_id, token, result))

        def complete_many(self, completions):
            completions = list(completions)
            inv = time.time_ns()
            for job_id, token, _ in completions:
                rec(op="complete", id=job_id, tok=token, inv=inv, out="sent")
            try:
                errs = super().complete_many(completions)
            except Exception as e:
                ret = time.time_ns()
                for job_id, token, _ in completions:
                    rec(op="complete", id=job_id, tok=token, inv=inv, ret=ret, out=outcome(e), err=str(e))
                raise
            ret = time.time_ns()
            for (job_id, token, _), err in zip(completions, errs):
                if err is None:
                    rec(op="complete", id=job_id, tok=token, inv=inv, ret=ret, out="ok")
                else:
                    rec(op="complete", id=job_id, tok=token, inv=inv, ret=ret, out=outcome(err), err=str(err))
            return errs

        def fail(self, job_id, token, error, **kw):
            return self._write("fail", job_id, token, lambda: super(Recording, self).fail(job_id, token, error, **kw))

        def release(self, job_id, token):
            return self._write("release", job_id, token, lambda: super(Recording, self).release(job_id, token))

        def snooze(self, job_id, token, seconds):
            return self._write("release", job_id, token, lambda: super(Recording, self).snooze(job_id, token, seconds))

        def cancel_job(self, job_id):
            with tokens_lock:
                token = tokens.get(job_id, "")
            return self._write("fail", job_id, token, lambda: super(Recording, self).cancel_job(job_id))

    def handle_work(ctx):
        time.sleep(random.uniform(0, 0.02))
        if isinstance(ctx.payload, dict) and ctx.payload.get("fail") and ctx.attempt == 1:
            raise RuntimeError("first attempt of job %d fails" % ctx.id)
        return {"ok": True}

    def recorded(fn):
        def run(ctx):
            job = ctx.job
            rec(op="start", id=job.id, tok=job.token, inv=time.time_ns())
            try:
                return fn(ctx)
            finally:
                rec(op="end", id=job.id, tok=job.token, inv=time.time_ns())
        return run

    worker.HANDLERS["work"] = handle_work
    for kind, fn in list(worker.HANDLERS.items()):
        worker.HANDLERS[kind] = recorded(fn)
    return worker.main(sys.argv[4:], client_class=Recording)


if __name__ == "__main__":
    sys.exit(main())
