#!/usr/bin/env python3
"""A readpast worker in Python 3, standard library only.

It long-polls POST /v1/claim for jobs, runs each with the handler for its
kind while a background thread heartbeats the lease, and then completes the
job with its result or fails it with the error. Kinds handled:

  add    payload {"numbers": [1, 2, 3]} (or a bare list): result {"sum": 6}
  fail   raises, so the job fails (and is retried until max_attempts)
  sleep  payload {"seconds": 2}: sleeps, heartbeating meanwhile

A job of any other kind is failed for good (discard) with "no handler".

Usage:

  READPAST_TOKEN=$TOKEN python3 worker.py --url http://127.0.0.1:8080 \
      --queue default --max-jobs 10

Stops after --max-jobs jobs, after one claim with --once, or on Ctrl-C /
SIGTERM, releasing the job in hand so another worker takes it at once.
"""

import argparse
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request


class APIError(Exception):
    """An error response from the readpast server."""

    def __init__(self, status, code, message, field=None):
        super().__init__("%d %s: %s%s" % (status, code, message, " (field %s)" % field if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field


class Client:
    """A minimal client for the readpast HTTP API."""

    def __init__(self, base_url, token=None, timeout=30.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method, path, body=None, timeout=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raw = e.read().decode("utf-8", "replace")
            try:
                err = json.loads(raw)["error"]
                raise APIError(e.code, err.get("code", ""), err.get("message", ""), err.get("field")) from None
            except (ValueError, KeyError, TypeError):
                raise APIError(e.code, "http_error", raw.strip() or e.reason) from None

    def claim(self, worker, queues, limit=1, lease_seconds=30, wait_seconds=20):
        body = {
            "worker": worker,
            "queues": queues,
            "limit": limit,
            "lease_seconds": lease_seconds,
            "wait_seconds": wait_seconds,
        }
        # The server holds a long poll for up to wait_seconds.
        return self.request("POST", "/v1/claim", body, timeout=wait_seconds + 30)["jobs"]

    def heartbeat(self, job_id, token, lease_seconds):
        return self.request("POST", "/v1/jobs/%d/heartbeat" % job_id,
                            {"token": token, "lease_seconds": lease_seconds})

    def complete(self, job_id, token, result):
        return self.request("POST", "/v1/jobs/%d/complete" % job_id, {"token": token, "result": result})

    def fail(self, job_id, token, error, stack="", discard=False):
        body = {"token": token, "error": error}
        if stack:
            body["stack"] = stack
        if discard:
            body["discard"] = True
        return self.request("POST", "/v1/jobs/%d/fail" % job_id, body)

    def release(self, job_id, token):
        return self.request("POST", "/v1/jobs/%d/release" % job_id, {"token": token})


class Discard(Exception):
    """Raised by a handler to fail a job for good, whatever attempts remain."""


def handle_add(payload):
    numbers = payload.get("numbers") if isinstance(payload, dict) else payload
    if not isinstance(numbers, list) or not all(
            isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
        raise Discard("add wants a list of numbers, got %r" % (numbers,))
    return {"sum": sum(numbers)}


def handle_fail(payload):
    message = payload.get("message") if isinstance(payload, dict) else None
    raise RuntimeError(message or "job asked to fail")


def handle_sleep(payload):
    seconds = float(payload.get("seconds", 1)) if isinstance(payload, dict) else 1.0
    time.sleep(seconds)
    return {"slept": seconds}


HANDLERS = {"add": handle_add, "fail": handle_fail, "sleep": handle_sleep}

# How often an idle worker says it is still waiting.
IDLE_LOG_SECONDS = 60

# The longest wait between two claims when claims fail (the server or its
# database away).
CLAIM_BACKOFF_MAX = 0.8


class Heartbeat(threading.Thread):
    """Extends a job's lease every interval until stopped.

    If the server says the token is stale (the lease expired and the job
    was rescued, or it was cancelled), `lost` is set: the result of the
    work can no longer be recorded.
    """

    def __init__(self, client, job, lease_seconds, interval, log):
        super().__init__(daemon=True)
        self.client = client
        self.job = job
        self.lease_seconds = lease_seconds
        self.interval = interval
        self.log = log
        self.stopped = threading.Event()
        self.lost = threading.Event()

    def run(self):
        while not self.stopped.wait(self.interval):
            try:
                self.client.heartbeat(self.job["id"], self.job["token"], self.lease_seconds)
            except APIError as e:
                if e.status in (404, 409):
                    self.log("job %d: lease lost (%s)" % (self.job["id"], e.code))
                    self.lost.set()
                    return
                self.log("job %d: heartbeat: %s" % (self.job["id"], e))
            except (OSError, urllib.error.URLError) as e:
                self.log("job %d: heartbeat: %s" % (self.job["id"], e))

    def stop(self):
        self.stopped.set()
        self.join()


class Worker:
    def __init__(self, client, args, log):
        self.client = client
        self.args = args
        self.log = log
        self.stopping = threading.Event()

    def process(self, job):
        """Runs one claimed job and records the outcome."""
        job_id, kind = job["id"], job["kind"]
        handler = HANDLERS.get(kind)
        hb = Heartbeat(self.client, job, self.args.lease, self.args.heartbeat or self.args.lease / 3.0, self.log)
        hb.start()
        try:
            if handler is None:
                raise Discard("no handler for kind %r" % kind)
            result = handler(job["payload"])
        except KeyboardInterrupt:
            hb.stop()
            self.log("job %d: interrupted; releasing it" % job_id)
            self.safe(self.client.release, job_id, job["token"])
            raise
        except Discard as e:
            hb.stop()
            self.log("job %d (%s) failed for good: %s" % (job_id, kind, e))
            self.safe(self.client.fail, job_id, job["token"], str(e), "", True)
        except Exception as e:  # the job's own failure
            hb.stop()
            self.log("job %d (%s) attempt %d failed: %s" % (job_id, kind, job["attempt"], e))
            self.safe(self.client.fail, job_id, job["token"], "%s: %s" % (type(e).__name__, e),
                      traceback.format_exc())
        else:
            # The heartbeat goes on until the completion is written, so
            # that a server or database away for a while does not cost the
            # lease: the completion is retried for as long as the lease
            # lasts, and only then does the job run again elsewhere.
            try:
                if hb.lost.is_set():
                    self.log("job %d: finished after its lease was lost; result dropped" % job_id)
                    return
                if self.complete_retrying(job, result, hb):
                    self.log("job %d (%s) succeeded: %s" % (job_id, kind, json.dumps(result)))
            finally:
                hb.stop()

    def complete_retrying(self, job, result, hb):
        """Completes job, retrying errors that may pass (the server or its
        database away: 5xx, 429, no connection) for up to one lease while
        hb keeps the lease alive. Returns whether it was recorded."""
        deadline = time.monotonic() + self.args.lease
        backoff = 0.1
        while True:
            try:
                self.client.complete(job["id"], job["token"], result)
                return True
            except APIError as e:
                if e.status < 500 and e.status != 429:
                    # 409: the lease expired and the job was rescued, or it
                    # was cancelled; nothing was changed.
                    self.log("complete(%s): %s" % (job["id"], e))
                    return False
                err = e
            except (OSError, urllib.error.URLError) as e:
                err = e
            if hb.lost.is_set() or time.monotonic() + backoff > deadline:
                self.log("complete(%s): %s (gave up; the lease will expire and the job be retried)" % (job["id"], err))
                return False
            self.log("complete(%s): %s; retrying" % (job["id"], err))
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def safe(self, fn, *args):
        try:
            return fn(*args)
        except APIError as e:
            # 409: the lease expired and the job was rescued, or it was
            # cancelled; nothing was changed, another attempt will run.
            self.log("%s(%s): %s" % (fn.__name__, args[0], e))
        except (OSError, urllib.error.URLError) as e:
            self.log("%s(%s): %s (the lease will expire and the job be retried)" % (fn.__name__, args[0], e))
        return None

    @staticmethod
    def next_backoff(backoff):
        """Doubles backoff from 0.05 s up to CLAIM_BACKOFF_MAX."""
        return min(max(backoff * 2, 0.05), CLAIM_BACKOFF_MAX)

    def pause(self, why, backoff):
        """Waits before the next claim after a failure: a time drawn from
        the upper half of a backoff that doubles up to CLAIM_BACKOFF_MAX,
        so that workers that lost the server together come back spread
        out, each within about a second of its return. Returns the new
        backoff."""
        backoff = self.next_backoff(backoff)
        wait = random.uniform(backoff / 2, backoff)
        self.log("%s; retrying in %.2fs" % (why, wait))
        self.stopping.wait(wait)
        return backoff

    def run(self):
        done = 0
        backoff = 0.0
        self.log("waiting for jobs on %s at %s" % (", ".join(self.args.queue), self.client.base_url))
        idle_since = time.monotonic()
        while not self.stopping.is_set():
            limit = 1
            if self.args.max_jobs:
                limit = max(1, min(self.args.concurrency, self.args.max_jobs - done))
            try:
                jobs = self.client.claim(self.args.name, self.args.queue, limit, self.args.lease, self.args.wait)
                backoff = 0.0
            except APIError as e:
                if 400 <= e.status < 500 and e.status != 429:
                    self.log("claim rejected: %s" % e)
                    return 2
                backoff = self.pause("claim: %s" % e, backoff)
                continue
            except (OSError, urllib.error.URLError, socket.timeout) as e:
                backoff = self.pause("claim: %s" % e, backoff)
                continue
            if not jobs and time.monotonic() - idle_since >= IDLE_LOG_SECONDS:
                self.log("no jobs in the last %d s; still waiting" % (time.monotonic() - idle_since))
                idle_since = time.monotonic()
            for job in jobs:
                self.process(job)
                done += 1
                idle_since = time.monotonic()
            if self.args.once or (self.args.max_jobs and done >= self.args.max_jobs):
                break
        self.log("processed %d job(s)" % done)
        return 0


def main(argv=None):
    p = argparse.ArgumentParser(description="A readpast worker (Python standard library only).")
    p.add_argument("--url", default=os.environ.get("READPAST_URL", "http://127.0.0.1:8080"),
                   help="server base URL (default $READPAST_URL or http://127.0.0.1:8080)")
    p.add_argument("--token", default=os.environ.get("READPAST_TOKEN"),
                   help="bearer token (default $READPAST_TOKEN)")
    p.add_argument("--queue", action="append", help="queue to claim from; repeatable (default: default)")
    p.add_argument("--name", default="py-%s-%d" % (socket.gethostname(), os.getpid()), help="worker name")
    p.add_argument("--lease", type=float, default=30.0, help="lease in seconds (default 30)")
    p.add_argument("--heartbeat", type=float, default=0, help="heartbeat interval in seconds (default lease/3)")
    p.add_argument("--wait", type=float, default=20.0, help="long-poll wait in seconds (default 20)")
    p.add_argument("--concurrency", type=int, default=1, help="jobs to claim at once (run one after another)")
    p.add_argument("--max-jobs", type=int, default=0, help="exit after this many jobs (default: run forever)")
    p.add_argument("--once", action="store_true", help="claim once, run what came, and exit")
    args = p.parse_args(argv)
    args.queue = args.queue or ["default"]

    def log(msg):
        print("worker %s: %s" % (args.name, msg), file=sys.stderr, flush=True)

    worker = Worker(Client(args.url, args.token), args, log)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        return worker.run()
    except KeyboardInterrupt:
        log("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
