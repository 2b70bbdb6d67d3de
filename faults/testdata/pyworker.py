#!/usr/bin/env python3
"""The example Python worker (examples/python-worker/worker.py), unchanged,
with every call it makes to the server and every handler run recorded in a
history file for the fault suite (internal/history's format: one JSON
object a line, each written with one write(2)).

Usage: pyworker.py WORKER_PY HISTORY_FILE PROC_NAME [worker.py options...]

It handles kind "work": payload {"fail": true} fails the first attempt.
"""

import importlib.util
import json
import os
import random
import sys
import time


def load(path):
    spec = importlib.util.spec_from_file_location("worker", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    worker = load(sys.argv[1])
    fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    proc = sys.argv[3]

    def rec(**e):
        e["proc"] = proc
        os.write(fd, (json.dumps(e) + "\n").encode())

    def outcome(exc):
        if isinstance(exc, worker.APIError):
            if exc.status == 409:
                return "stale"
            if exc.status == 404:
                return "notfound"
            if 400 <= exc.status < 500 and exc.status != 429:
                return "refused"
        return "error"

    class Recording(worker.Client):
        def claim(self, name, queues, limit=1, lease_seconds=30, wait_seconds=20):
            inv = time.time_ns()
            try:
                jobs = super().claim(name, queues, limit, lease_seconds, wait_seconds)
            except Exception as e:
                rec(op="claimcall", inv=inv, ret=time.time_ns(), out="error", err=str(e))
                raise
            ret = time.time_ns()
            rec(op="claimcall", inv=inv, ret=ret, out="ok", n=len(jobs))
            for j in jobs:
                rec(op="claim", id=j["id"], tok=j["token"], g=j.get("group") or "", inv=inv, ret=ret,
                    lease=int(lease_seconds * 1e9))
            return jobs

        def write(self, op, job_id, token, call, lease=0):
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

        def heartbeat(self, job_id, token, lease_seconds):
            return self.write("extend", job_id, token, lambda: super(Recording, self).heartbeat(job_id, token, lease_seconds),
                              int(lease_seconds * 1e9))

        def complete(self, job_id, token, result):
            return self.write("complete", job_id, token, lambda: super(Recording, self).complete(job_id, token, result))

        def fail(self, job_id, token, error, stack="", discard=False):
            return self.write("fail", job_id, token,
                              lambda: super(Recording, self).fail(job_id, token, error, stack, discard))

        def release(self, job_id, token):
            return self.write("release", job_id, token, lambda: super(Recording, self).release(job_id, token))

    current = {}

    def handle_work(payload):
        job = current["job"]
        rec(op="start", id=job["id"], tok=job["token"], inv=time.time_ns())
        try:
            time.sleep(random.uniform(0, 0.02))
            if isinstance(payload, dict) and payload.get("fail") and job["attempt"] == 1:
                raise RuntimeError("first attempt of job %d fails" % job["id"])
            return {"ok": True}
        finally:
            rec(op="end", id=job["id"], tok=job["token"], inv=time.time_ns())

    worker.HANDLERS["work"] = handle_work

    class RecordingWorker(worker.Worker):
        def process(self, job):
            current["job"] = job
            return super().process(job)

    worker.Client = Recording
    worker.Worker = RecordingWorker
    return worker.main(sys.argv[4:])


if __name__ == "__main__":
    sys.exit(main())
