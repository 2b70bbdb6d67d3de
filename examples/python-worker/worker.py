#!/usr/bin/env python3
"""A readpast worker in Python, built on the ``readpast`` package.

The package's :class:`readpast.Worker` does the heavy lifting: long-poll
claims, lease heartbeats, completions sent in batches, retries of calls
that may pass, and a graceful stop on SIGTERM or Ctrl-C. This file only
says which functions run which job kinds:

  add    payload {"numbers": [1, 2, 3]} (or a bare list): result {"sum": 6}
  fail   raises, so the attempt fails (and is retried until max_attempts)
  sleep  payload {"seconds": 2}: sleeps, heartbeated meanwhile

Usage (after ``pip install ./clients/python``, or straight from a clone):

  READPAST_TOKEN=$TOKEN python3 worker.py --url http://127.0.0.1:8080 \\
      --queue default --max-jobs 10
"""

import argparse
import logging
import os
import sys
import threading

try:
    import readpast
except ImportError:  # not installed: use the package of the clone this file is in
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))
    import readpast


def handle_add(ctx):
    numbers = ctx.payload.get("numbers") if isinstance(ctx.payload, dict) else ctx.payload
    if not isinstance(numbers, list) or not all(
            isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
        raise readpast.Discard("add wants a list of numbers, got %r" % (numbers,))
    return {"sum": sum(numbers)}


def handle_fail(ctx):
    message = ctx.payload.get("message") if isinstance(ctx.payload, dict) else None
    raise RuntimeError(message or "job asked to fail")


def handle_sleep(ctx):
    seconds = float(ctx.payload.get("seconds", 1)) if isinstance(ctx.payload, dict) else 1.0
    ctx.cancelled.wait(seconds)  # wakes early if the job is no longer ours
    return {"slept": seconds}


HANDLERS = {"add": handle_add, "fail": handle_fail, "sleep": handle_sleep}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="A readpast worker built on the readpast package.")
    p.add_argument("--url", default=os.environ.get("READPAST_URL", "http://127.0.0.1:8080"),
                   help="server base URL (default $READPAST_URL or http://127.0.0.1:8080)")
    p.add_argument("--token", default=os.environ.get("READPAST_TOKEN"),
                   help="bearer token (default $READPAST_TOKEN)")
    p.add_argument("--queue", action="append", help="queue to claim from; repeatable (default: default)")
    p.add_argument("--name", help="worker name recorded on jobs (default py-HOST-PID)")
    p.add_argument("--lease", type=float, default=30.0, help="lease in seconds (default 30)")
    p.add_argument("--heartbeat", type=float, default=0, help="heartbeat interval in seconds (default lease/3)")
    p.add_argument("--wait", type=float, default=20.0, help="long-poll wait in seconds (default 20)")
    p.add_argument("--concurrency", type=int, default=1, help="jobs run at once, a thread each (default 1)")
    p.add_argument("--max-jobs", type=int, default=0,
                   help="stop after handling this many jobs (default 0: run until SIGTERM or Ctrl-C)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0,
                   help="on stop, seconds running jobs get to finish before they are released (default 30)")
    args = p.parse_args(argv)
    if args.max_jobs < 0:
        p.error("--max-jobs must not be negative")
    args.queue = args.queue or ["default"]
    return args


def main(argv=None, client_class=readpast.Client):
    """Runs the worker; client_class lets a caller pass a Client subclass."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        client = client_class(args.url, token=args.token)
        worker = readpast.Worker(
            client, args.queue, name=args.name, concurrency=args.concurrency,
            lease_seconds=args.lease, heartbeat_interval=args.heartbeat or None,
            wait_seconds=args.wait, shutdown_timeout=args.shutdown_timeout)
    except (TypeError, ValueError) as e:
        print("worker.py: %s" % e, file=sys.stderr)
        return 2

    handled = 0
    lock = threading.Lock()

    def counted(fn):
        """fn, stopping the worker once --max-jobs handlers have run."""
        def run(ctx):
            nonlocal handled
            try:
                return fn(ctx)
            finally:
                with lock:
                    handled += 1
                    if args.max_jobs and handled >= args.max_jobs:
                        worker.stop()  # no more claims; outcomes are still sent
        return run

    for kind, fn in HANDLERS.items():
        worker.register(kind, counted(fn))
    try:
        worker.run()  # until --max-jobs, SIGTERM or Ctrl-C
    except readpast.APIError as e:  # the server refused the claim for good
        print("worker.py: %s" % e, file=sys.stderr)
        return 2
    finally:
        client.close()
    print("worker %s: handled %d job(s): %s" % (worker.name, handled, worker.counts), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
