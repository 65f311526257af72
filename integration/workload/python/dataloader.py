"""One training epoch's data loading with PyTorch (strata-bench).

torchvision.datasets.ImageFolder over ROOT and a
torch.utils.data.DataLoader(num_workers=8, shuffle=True, batch_size=64),
with the standard ImageNet transforms (train: RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize; eval: Resize(256),
CenterCrop(224), ToTensor, Normalize). The training loop does nothing
with a batch but take it: what is measured is how fast the filesystem and
the workers deliver images, the question "do my GPUs wait?".

Prints one JSON line on stdout per epoch (with --serve, one epoch per
request line on stdin, in one process, as a training job runs its epochs):
  images, batches, classes, seconds (the epoch: from creating the
  iterator, which starts the workers, to the last batch), images_per_s,
  scan_seconds (building the ImageFolder: listing ROOT), batch_waits_s
  (how long the loop waited for each batch), truncated (stopped at
  --max-seconds), torch and torchvision versions.

Run by strata-bench (integration/workload/dataloader.go) as
/usr/bin/python3 with Debian's python3-torch and python3-torchvision.
"""

import argparse
import json
import sys
import time

import torch
import torchvision
from torchvision import datasets, transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def transform(name):
    if name == "train":
        steps = [transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()]
    else:
        steps = [transforms.Resize(256), transforms.CenterCrop(224)]
    return transforms.Compose(steps + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def epoch(a, seed, max_seconds):
    """One epoch over a.root; returns its report."""
    torch.manual_seed(seed)
    t0 = time.monotonic()
    ds = datasets.ImageFolder(a.root, transform=transform(a.transform))
    scan = time.monotonic() - t0
    gen = torch.Generator()
    gen.manual_seed(seed)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True,
                                         num_workers=a.workers, generator=gen)
    images = batches = 0
    waits = []
    truncated = False
    start = time.monotonic()
    last = start
    it = iter(loader)  # starts the workers
    for x, y in it:
        now = time.monotonic()
        waits.append(now - last)
        images += x.shape[0]
        batches += 1
        if x.shape[1:] != (3, 224, 224) or y.shape[0] != x.shape[0]:
            raise SystemExit(f"unexpected batch shape {tuple(x.shape)} / {tuple(y.shape)}")
        if max_seconds > 0 and now - start >= max_seconds and images < len(ds):
            truncated = True
            break
        last = time.monotonic()
    elapsed = time.monotonic() - start
    del it, loader  # stops the workers: nothing stays open on the filesystem
    return {
        "images": images, "batches": batches, "classes": len(ds.classes), "dataset_images": len(ds),
        "seconds": elapsed, "images_per_s": images / elapsed if elapsed > 0 else 0,
        "scan_seconds": scan, "batch_waits_s": waits, "truncated": truncated,
        "workers": a.workers, "batch_size": a.batch_size, "transform": a.transform,
        "torch": torch.__version__, "torchvision": torchvision.__version__,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--transform", choices=["train", "eval"], default="train")
    p.add_argument("--seed", type=int, default=1, help="shuffle and augmentation seed")
    p.add_argument("--max-seconds", type=float, default=0, help="stop the epoch after this long (0: never)")
    p.add_argument("--serve", action="store_true",
                   help='run an epoch per line read on stdin ({"seed": N, "max_seconds": S}) until EOF')
    a = p.parse_args()
    if not a.serve:
        print(json.dumps(epoch(a, a.seed, a.max_seconds)), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            req = json.loads(line)
            print(json.dumps(epoch(a, req["seed"], req.get("max_seconds", 0))), flush=True)


if __name__ == "__main__":
    main()
