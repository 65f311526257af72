"""Where a small-file read's time goes, per step (strata issue #14).

For each ROOT (local disk, a Strata mount, ...), several rounds of: drop
the page cache and dentries (echo 3 > /proc/sys/vm/drop_caches; needs
root), list the tree as torchvision's ImageFolder does (os.scandir walk),
then read every file once in a fixed shuffled order, one process, timing
each step as Python's own open() performs it:

  open   os.open(path, O_RDONLY): LOOKUP (if the dentry is gone) + OPEN
  isatty os.isatty(fd): the TCGETS ioctl that builtins.open() issues on
         every file before Python 3.14 (a FUSE_IOCTL round trip on FUSE)
  read   os.read in 128 KiB chunks to EOF
  close  os.close(fd): FLUSH unless the open said NOFLUSH, then RELEASE
         (sent in the background)

Then, as the floor any FUSE request pays on this machine, the round trip
between two processes: a one-byte pipe ping-pong, once with the two free
to run on any core (as a reader and the FUSE daemon are) and once pinned
to one core. A FUSE request is such a round trip (the reader sleeps, a
daemon thread wakes, answers, the reader wakes); on a VM a wake-up on
another core can cost many times one on the same core.

Prints one JSON line per root and round (median µs per file and step,
and files/s over the whole round), then a summary table of the medians
over rounds with the ratio of each root's total to the first root's.

Usage: perfile.py [--rounds N] [--files N] ROOT...
"""

import argparse
import json
import os
import random
import statistics
import sys
import time

STEPS = ("open", "isatty", "read", "close")


def files_of(root):
    out = []
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    out.append(os.path.relpath(e.path, root))
    return sorted(out)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def one_round(root, names):
    drop_caches()
    t0 = time.perf_counter_ns()
    files_of(root)  # the scan an ImageFolder does first
    scan = time.perf_counter_ns() - t0
    per = {s: [] for s in STEPS}
    total = 0
    start = time.perf_counter_ns()
    for n in names:
        p = os.path.join(root, n)
        a = time.perf_counter_ns()
        fd = os.open(p, os.O_RDONLY)
        b = time.perf_counter_ns()
        os.isatty(fd)
        c = time.perf_counter_ns()
        while True:
            chunk = os.read(fd, 128 << 10)
            if not chunk:
                break
            total += len(chunk)
        d = time.perf_counter_ns()
        os.close(fd)
        e = time.perf_counter_ns()
        for s, v in zip(STEPS, (b - a, c - b, d - c, e - d)):
            per[s].append(v)
    wall = time.perf_counter_ns() - start
    return {
        "root": root, "files": len(names), "bytes": total, "scan_s": scan / 1e9,
        "files_per_s": len(names) / (wall / 1e9),
        "median_us": {s: statistics.median(v) / 1e3 for s, v in per.items()},
        "mean_us": {s: statistics.fmean(v) / 1e3 for s, v in per.items()},
    }


def pipe_round_trip(n, cpu=None):
    """Median µs of n one-byte round trips between two processes over
    pipes, both pinned to core cpu when given."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        for _ in range(n):
            os.read(r1, 1)
            os.write(w2, b"x")
        os._exit(0)
    old = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    lat = []
    try:
        for _ in range(n):
            a = time.perf_counter_ns()
            os.write(w1, b"x")
            os.read(r2, 1)
            lat.append(time.perf_counter_ns() - a)
    finally:
        os.sched_setaffinity(0, old)
        os.waitpid(pid, 0)
        for fd in (r1, w1, r2, w2):
            os.close(fd)
    return statistics.median(lat) / 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=2000, help="files read per round (the first N of a fixed shuffle)")
    a = ap.parse_args()
    names = files_of(a.roots[0])
    random.Random(1).shuffle(names)
    names = names[: a.files]
    rounds = {r: [] for r in a.roots}
    for i in range(a.rounds):
        for r in a.roots:  # interleaved, so drift hits every root alike
            res = one_round(r, names)
            res["round"] = i
            rounds[r].append(res)
            print(json.dumps(res), flush=True)
    print(f"\nmedian over {a.rounds} rounds of the per-file median, µs; "
          f"{len(names)} files, one process, page cache and dentries dropped before each round", file=sys.stderr)
    print(f"{'root':40} " + " ".join(f"{s:>7}" for s in STEPS) + f" {'sum':>7} {'× first':>8} {'files/s (spread)':>22}", file=sys.stderr)
    base = None
    for r in a.roots:
        med = {s: statistics.median(x["median_us"][s] for x in rounds[r]) for s in STEPS}
        tot = sum(med.values())
        base = base or tot
        fps = sorted(x["files_per_s"] for x in rounds[r])
        print(f"{r:40} " + " ".join(f"{med[s]:7.1f}" for s in STEPS) +
              f" {tot:7.1f} {base / tot:8.2f} {statistics.median(fps):9.0f} ({fps[0]:.0f}-{fps[-1]:.0f})", file=sys.stderr)
    anycore = pipe_round_trip(20000)
    onecore = pipe_round_trip(20000, cpu=0)
    print(json.dumps({"pipe_round_trip_us": {"any_core": anycore, "one_core": onecore}}), flush=True)
    print(f"\nround trip between two processes (pipe ping-pong, median of 20,000): {anycore:.1f} µs on any cores, "
          f"{onecore:.1f} µs pinned to one core", file=sys.stderr)


if __name__ == "__main__":
    main()
