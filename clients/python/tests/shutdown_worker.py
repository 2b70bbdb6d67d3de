"""A worker process for test_shutdown: runs `sleep` jobs (payload
{"seconds": s}) from the queue given, printing "start ID" and "end ID" as
each handler starts and ends, until SIGTERM or SIGINT.

    python3 shutdown_worker.py QUEUE CONCURRENCY SHUTDOWN_TIMEOUT
"""

import logging
import sys
import threading
import time

import support
from support import readpast


def main() -> int:
    queue, concurrency, shutdown_timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")

    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:  # one write per line: handlers print from threads of their own
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def sleep(ctx: readpast.JobContext) -> object:
        say("start %d" % ctx.id)
        time.sleep(float(ctx.payload["seconds"]))  # does not look at ctx.cancelled
        say("end %d" % ctx.id)
        return {"slept": ctx.payload["seconds"]}

    worker = readpast.Worker(
        support.client(), [queue], {"sleep": sleep}, concurrency=concurrency,
        shutdown_timeout=shutdown_timeout, wait_seconds=20, lease_seconds=30,
    )
    say("ready")
    worker.run()
    say("exit %s" % sorted(worker.counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
