"""Drains no-op jobs through a readpast server with one Python worker
process and prints the rate.

    READPAST_URL=http://127.0.0.1:8080 READPAST_TOKEN=... \
        python3 clients/python/bench/drain.py --jobs 20000 --concurrency 128

It enqueues --jobs jobs of kind "noop" into a queue of its own (batches of
1,000), then runs a readpast.Worker until its handlers have run them all
and it has stopped (every completion written), and prints both rates.

With --rate R it measures latency instead: the worker waits on an empty
queue while jobs are enqueued one by one, R a second for --seconds (from
eight threads of a child process, or of this one with --enqueuer
thread), and it prints the percentiles of enqueue-to-start (the handler's
clock minus the enqueuer's, one machine).

Run it from a clone without installing the package: it falls back to the
clone's clients/python/src.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Dict

try:
    import readpast
except ImportError:  # a clone, without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    import readpast


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("READPAST_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--rate", type=float, default=0, help="jobs a second, enqueued one by one (latency mode)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--enqueuer", choices=("thread", "process"), default="process",
                    help="latency mode: enqueue from threads of this process or from a child process")
    ap.add_argument("--queue", help=argparse.SUPPRESS)  # the child enqueuer's queue
    a = ap.parse_args()
    if a.rate > 0 and a.queue:
        returned = enqueue_paced(a, readpast.Client(a.url, token=os.environ.get("READPAST_TOKEN")), a.queue)
        json.dump(returned, sys.stdout)
        return
    if a.rate > 0:
        latency(a)
        return
    if a.jobs < 1 or a.concurrency < 1:
        ap.error("--jobs and --concurrency must be at least 1")
    queue = "drain-" + uuid.uuid4().hex[:8]
    client = readpast.Client(a.url, token=os.environ.get("READPAST_TOKEN"))
    t0 = time.monotonic()
    for i in range(0, a.jobs, 1000):
        client.enqueue_many([readpast.JobSpec("noop", None, queue=queue) for _ in range(min(1000, a.jobs - i))])
    t1 = time.monotonic()

    lock = threading.Lock()
    ran = [0]
    all_ran = threading.Event()

    def noop(ctx: readpast.JobContext) -> None:
        with lock:
            ran[0] += 1
            if ran[0] == a.jobs:
                all_ran.set()

    worker = readpast.Worker(client, [queue], {"noop": noop}, concurrency=a.concurrency, wait_seconds=1)
    t2 = time.monotonic()
    thread = worker.start()
    all_ran.wait()
    worker.stop(timeout=30)
    thread.join()
    t3 = time.monotonic()
    print("enqueued %d jobs in %.2fs (%.0f/s); drained them in %.2fs: %.0f jobs/s (concurrency %d, %s)"
          % (a.jobs, t1 - t0, a.jobs / (t1 - t0), t3 - t2, a.jobs / (t3 - t2), a.concurrency,
             dict((k, v) for k, v in worker.counts.items() if v)))


def enqueue_paced(a: argparse.Namespace, client: readpast.Client, queue: str) -> Dict[int, float]:
    """Enqueues rate x seconds jobs one by one, paced, from eight threads
    (one enqueue waits for its commit); returns when each enqueue
    returned (time.time()), by job id."""
    n = int(a.rate * a.seconds)
    begin = time.monotonic()
    returned: Dict[int, float] = {}

    def enqueue(first: int) -> None:  # every 8th job from first on
        for i in range(first, n, 8):
            pause = begin + i / a.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            job = client.enqueue("noop", {"t": time.time()}, queue=queue)
            returned[job.id] = time.time()

    enqueuers = [threading.Thread(target=enqueue, args=(i,)) for i in range(8)]
    for t in enqueuers:
        t.start()
    for t in enqueuers:
        t.join()
    return returned


def latency(a: argparse.Namespace) -> None:
    queue = "latency-" + uuid.uuid4().hex[:8]
    client = readpast.Client(a.url, token=os.environ.get("READPAST_TOKEN"))
    lock = threading.Lock()
    delays = []
    starts: Dict[int, float] = {}

    def noop(ctx: readpast.JobContext) -> None:
        started = time.time()
        with lock:
            delays.append(started - ctx.payload["t"])
            starts[ctx.job.id] = started

    worker = readpast.Worker(client, [queue], {"noop": noop}, concurrency=a.concurrency, wait_seconds=20)
    thread = worker.start()
    time.sleep(0.5)  # the worker's first long poll is waiting
    n = int(a.rate * a.seconds)
    begin = time.monotonic()
    if a.enqueuer == "process":  # the enqueuers do not share this process's GIL
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--url", a.url, "--rate", str(a.rate),
                              "--seconds", str(a.seconds), "--queue", queue], check=True, stdout=subprocess.PIPE)
        returned = {int(k): v for k, v in json.loads(out.stdout).items()}
    else:
        returned = enqueue_paced(a, client, queue)
    rate = n / (time.monotonic() - begin)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if len(delays) >= n:
                break
        time.sleep(0.05)
    worker.stop(timeout=30)
    thread.join()
    ds = sorted(delays)
    if len(ds) < n:
        sys.exit("only %d of %d jobs started within 30 s" % (len(ds), n))

    def pct(p: float) -> float:
        return ds[min(len(ds) - 1, int(p * len(ds)))] * 1000

    print("%d jobs at %.0f/s: enqueue to start p50 %.1f ms, p99 %.1f ms, max %.1f ms (concurrency %d)"
          % (n, rate, pct(0.5), pct(0.99), ds[-1] * 1000, a.concurrency))
    # From the enqueue's return (its commit seen) instead of its call: the
    # claim side alone. A job can start before its enqueue returns.
    ds = sorted(max(0.0, starts[i] - returned[i]) for i in starts if i in returned)
    print("   from the enqueue's return: p50 %.1f ms, p99 %.1f ms, max %.1f ms"
          % (pct(0.5), pct(0.99), ds[-1] * 1000))


if __name__ == "__main__":
    main()
