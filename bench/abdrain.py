#!/usr/bin/env python3
"""Compares two builds' BenchmarkDrain/postgres, run in interleaved pairs.

    go test -c -o /tmp/a.test .      # at the base commit (git worktree)
    go test -c -o /tmp/b.test .      # at the commit under test
    READPAST_DATABASE_URL=postgres://postgres@127.0.0.1:PORT/postgres \\
        python3 bench/abdrain.py --pgdata DIR --pairs 24 /tmp/a.test /tmp/b.test

Both builds drain against the one PostgreSQL server READPAST_DATABASE_URL
names (each run in a fresh database of its own), A then B and B then A in
turn, so that drift of the machine falls on both alike. For every run it
records the drain's jobs/s, the CPU time of the test process, and the CPU
time the server's processes used meanwhile (read from /proc, which is why
the server must run on this machine: --pgdata is its data directory).

It prints, for each measure, both sides' medians, the median of the pairs'
ratios B/A with a bootstrap 95% interval, and writes every run to --out.
--args passes flags to both, --b-args to B only (--b-args=-drain.trace:
tracing on in B).
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time


def server_ticks(pgdata):
    """CPU clock ticks the postmaster and its children have used, the
    exited ones included (the postmaster's cutime and cstime)."""
    with open(os.path.join(pgdata, "postmaster.pid")) as f:
        pm = int(f.readline())

    def stat(pid):
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        fields = s[s.rfind(")") + 2:].split()
        return int(fields[1]), [int(x) for x in fields[11:15]]

    _, t = stat(pm)
    total = sum(t)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            ppid, t = stat(pid)
        except OSError:
            continue
        if ppid == pm:
            total += t[0] + t[1]
    return total


def run(binary, args, pgdata, benchtime):
    before = server_ticks(pgdata)
    start = os.times()
    out = subprocess.run(
        [binary, "-test.run", "^$", "-test.bench", "Drain/postgres", "-test.benchtime", benchtime, *args],
        capture_output=True, text=True, check=False)
    end = os.times()
    after = server_ticks(pgdata)
    m = re.search(r"([\d.]+) jobs/s", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"{binary} failed:\n{out.stdout}\n{out.stderr}")
    client = (end.children_user - start.children_user) + (end.children_system - start.children_system)
    return {"jobs_per_s": float(m.group(1)), "client_cpu_s": client,
            "server_cpu_s": (after - before) / os.sysconf("SC_CLK_TCK")}


def median_ratio(pairs, key):
    ratios = [b[key] / a[key] for a, b in pairs]
    boot = sorted(statistics.median(random.choices(ratios, k=len(ratios))) for _ in range(5000))
    return statistics.median(ratios), boot[125], boot[4874]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--pgdata", required=True, help="the data directory of the server READPAST_DATABASE_URL names")
    p.add_argument("--pairs", type=int, default=16)
    p.add_argument("--benchtime", default="3x")
    p.add_argument("--args", default="", help="flags for both, space-separated (--args=-drain.trace: both traced)")
    p.add_argument("--b-args", default="", help="flags for B only, space-separated")
    p.add_argument("--out", default="abdrain.log")
    o = p.parse_args()
    if not os.environ.get("READPAST_DATABASE_URL"):
        sys.exit("set READPAST_DATABASE_URL to a server on this machine (see --help)")
    sides = {"A": (o.a, o.args.split()), "B": (o.b, o.args.split() + o.b_args.split())}
    pairs = []
    with open(o.out, "a") as log:
        for i in range(o.pairs):
            got = {}
            for side in ("A", "B") if i % 2 else ("B", "A"):
                got[side] = run(*sides[side], o.pgdata, o.benchtime)
                print(time.strftime("%H:%M:%S"), side, got[side], file=log, flush=True)
            pairs.append((got["A"], got["B"]))
    for key in ("jobs_per_s", "server_cpu_s", "client_cpu_s"):
        ma = statistics.median(a[key] for a, _ in pairs)
        mb = statistics.median(b[key] for _, b in pairs)
        r, lo, hi = median_ratio(pairs, key)
        print(f"{key:13} A {ma:10.1f}  B {mb:10.1f}  B/A median {r:.3f} (95% {lo:.3f}-{hi:.3f})")


if __name__ == "__main__":
    main()
