"""MLPerf Storage-style accelerator utilisation (AU) replay (strata-bench).

Emulates N accelerators training resnet50 the way MLPerf Storage's
benchmark (DLIO) does: each accelerator has its own
torch.utils.data.DataLoader (--workers worker processes, MLPerf's
read_threads) over its share of the samples (every N-th file under ROOT,
shuffled), takes a batch, then "computes" by sleeping --compute-ms, and
takes the next. Samples are read whole and not decoded (MLPerf reads
records without decoding); a worker hands the loop only each sample's
length, so that the measure is the filesystem, not pickling on a small
machine.

AU of an accelerator = its compute time / its wall time, the wall time
running from its first batch (worker start-up, reported apart as
first_batch_s, is left out: at the small scale of this bench it would
dwarf a few batches) to the end of its last compute. The run's AU is the
sum of compute over the sum of wall time (min_au is the worst
accelerator's).

Prints one JSON line per run (with --serve, one run per request line
{"accelerators": N, "seed": S} on stdin, in one process): accelerators,
samples, bytes, batches, compute_s, wall_s, au, min_au, first_batch_s
(the slowest accelerator's), seconds (the whole run), torch version.

Run by strata-bench (integration/workload/au.go) as /usr/bin/python3 with
Debian's python3-torch.
"""

import argparse
import json
import os
import random
import sys
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return len(f.read())


def files_of(root):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names]
    return sorted(out)


def run(a, n, seed):
    paths = files_of(a.root)
    if len(paths) < n:
        raise SystemExit(f"{len(paths)} files under {a.root}, fewer than {n} accelerators")
    compute = a.compute_ms / 1000
    shards = []
    for i in range(n):
        mine = paths[i::n]
        random.Random(seed * 1000 + i).shuffle(mine)
        shards.append(mine)
    start = time.monotonic()
    # Start every accelerator's workers from this thread (forking from
    # several threads at once is unsafe), then drive each in a thread.
    iters = [iter(DataLoader(Files(s), batch_size=a.batch_size, num_workers=a.workers)) for s in shards]
    results = [None] * n
    errors = []

    def accelerator(i):
        try:
            first = end = None
            batches = samples = nbytes = 0
            for sizes in iters[i]:
                if first is None:
                    first = time.monotonic()
                batches += 1
                samples += len(sizes)
                nbytes += int(sizes.sum())
                time.sleep(compute)
                end = time.monotonic()  # the end of the last compute, not of the loader
            if first is None:
                raise RuntimeError("no batch")
            results[i] = {"batches": batches, "samples": samples, "bytes": nbytes,
                          "compute": batches * compute, "wall": end - first, "first": first - start}
        except Exception as e:  # reported by the main thread
            errors.append(f"accelerator {i}: {e!r}")

    threads = [threading.Thread(target=accelerator, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    del iters  # stops the workers: nothing stays open on the filesystem
    if errors:
        raise SystemExit("; ".join(errors))
    compute_s = sum(r["compute"] for r in results)
    wall_s = sum(r["wall"] for r in results)
    return {
        "accelerators": n, "samples": sum(r["samples"] for r in results), "bytes": sum(r["bytes"] for r in results),
        "batches": sum(r["batches"] for r in results), "compute_s": compute_s, "wall_s": wall_s,
        "au": compute_s / wall_s if wall_s > 0 else 0,
        "min_au": min(r["compute"] / r["wall"] if r["wall"] > 0 else 0 for r in results),
        "first_batch_s": max(r["first"] for r in results), "seconds": seconds, "dataset_files": len(paths),
        "batch_size": a.batch_size, "compute_ms": a.compute_ms, "workers": a.workers, "torch": torch.__version__,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True)
    p.add_argument("--accelerators", type=int, default=1)
    p.add_argument("--workers", type=int, default=8, help="DataLoader workers per accelerator")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--compute-ms", type=float, default=35.84, help="emulated compute per batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--serve", action="store_true",
                   help='run once per line read on stdin ({"accelerators": N, "seed": S}) until EOF')
    a = p.parse_args()
    if not a.serve:
        print(json.dumps(run(a, a.accelerators, a.seed)), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            req = json.loads(line)
            print(json.dumps(run(a, req["accelerators"], req.get("seed", 1))), flush=True)


if __name__ == "__main__":
    main()
