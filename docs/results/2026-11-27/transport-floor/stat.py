"""Round trips of a trivial request: os.stat of MOUNT/f with entry and
attribute timeouts 0 (a LOOKUP and a GETATTR per stat), NPROC processes."""
import multiprocessing as mp
import os
import sys
import time

p, nproc, n = sys.argv[1] + "/f", int(sys.argv[2]), 20000


def work(k):
    for _ in range(k):
        os.stat(p)


t = time.perf_counter()
with mp.Pool(nproc) as pool:
    pool.map(work, [n // nproc] * nproc)
print("%.1f" % ((time.perf_counter() - t) / n * 1e6))
