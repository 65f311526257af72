"""WebDataset-style streaming of tar shards with PyTorch (strata-bench).

The sequential counterpart of dataloader.py, written the way a WebDataset
pipeline reads: an IterableDataset over the shard list, split between
torch.utils.data.DataLoader workers (num_workers = --streams, one worker
per shard at a time, as webdataset's split_by_worker does), each worker
streaming its shards front to back with tarfile.open(path, mode="r|")
(webdataset's tariterators use the same streaming mode), reading every
member's bytes and grouping members into samples by key (the name before
the first dot: 000042.jpg and 000042.cls are one sample), batched in the
worker (like webdataset's .batched(64)) and handed to the training loop,
which does nothing with a batch but take it. Samples are not decoded: what
is measured is how fast the filesystem streams the shards.

Prints one JSON line on stdout per epoch (with --serve, one epoch per
request line on stdin, in one process, as a training job runs its
epochs): shards, samples, members, bytes (of members' contents), seconds
(from creating the iterator, which starts the workers, to the last
batch), mb_per_s, batch_waits_s, truncated (stopped at --max-seconds) and
the torch version.

Run by strata-bench (integration/workload/tarshards.go) as
/usr/bin/python3 with Debian's python3-torch.
"""

import argparse
import json
import os
import sys
import tarfile
import time

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class TarShards(IterableDataset):
    """Samples (dicts of member bytes keyed by extension) of the shards,
    each worker streaming its share of them."""

    def __init__(self, shards, batch_size):
        self.shards = shards
        self.batch_size = batch_size

    def samples(self, path):
        key, sample = None, {}
        with tarfile.open(path, mode="r|") as tar:
            for m in tar:
                if not m.isfile():
                    continue
                base = os.path.basename(m.name)
                k, _, ext = base.partition(".")
                data = tar.extractfile(m).read()
                if len(data) != m.size:
                    raise RuntimeError(f"{path}: {m.name}: read {len(data)} of {m.size} bytes")
                if k != key and sample:
                    yield sample
                    sample = {}
                key = k
                sample["__key__"] = k
                sample[ext] = data
        if sample:
            yield sample

    def __iter__(self):
        info = get_worker_info()
        mine = self.shards if info is None else self.shards[info.id::info.num_workers]
        batch = []
        for path in mine:
            for s in self.samples(path):
                batch.append(s)
                if len(batch) == self.batch_size:
                    yield batch
                    batch = []
        if batch:
            yield batch


def shards_of(root):
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.join(d, f) for f in files if f.endswith(".tar")]
    return sorted(out)


def epoch(a, max_seconds):
    """One pass over every shard under a.root; returns its report."""
    shards = shards_of(a.root)
    if not shards:
        raise SystemExit(f"no .tar shards under {a.root}")
    ds = TarShards(shards, a.batch_size)
    # batch_size=None: the dataset batches, as webdataset pipelines do.
    loader = DataLoader(ds, batch_size=None, num_workers=min(a.streams, len(shards)))
    samples = members = nbytes = 0
    waits = []
    truncated = False
    start = time.monotonic()
    last = start
    it = iter(loader)  # starts the workers
    for batch in it:
        now = time.monotonic()
        waits.append(now - last)
        for s in batch:
            samples += 1
            for k, v in s.items():
                if k != "__key__":
                    members += 1
                    nbytes += len(v)
        if max_seconds > 0 and now - start >= max_seconds:
            truncated = True
            break
        last = time.monotonic()
    elapsed = time.monotonic() - start
    del it, loader  # stops the workers: nothing stays open on the filesystem
    return {
        "shards": len(shards), "streams": min(a.streams, len(shards)), "samples": samples, "members": members,
        "bytes": nbytes, "seconds": elapsed, "mb_per_s": nbytes / 1e6 / elapsed if elapsed > 0 else 0,
        "batch_waits_s": waits, "truncated": truncated, "batch_size": a.batch_size, "torch": torch.__version__,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True, help="directory holding the .tar shards (searched recursively)")
    p.add_argument("--streams", type=int, default=4, help="DataLoader workers, each streaming one shard at a time")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-seconds", type=float, default=0, help="stop the epoch after this long (0: never)")
    p.add_argument("--serve", action="store_true",
                   help='run an epoch per line read on stdin ({"max_seconds": S}) until EOF')
    a = p.parse_args()
    if not a.serve:
        print(json.dumps(epoch(a, a.max_seconds)), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            req = json.loads(line)
            print(json.dumps(epoch(a, req.get("max_seconds", 0))), flush=True)


if __name__ == "__main__":
    main()
