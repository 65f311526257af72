"""Generate a torchvision ImageFolder tree of JPEG images (strata-bench).

Writes OUT/classNNN/imgNNNNNN.jpg: FILES images spread round-robin over
CLASSES class directories, each an ImageNet-like size (about 500x375, as
most ImageNet photos are) whose JPEG encoding lands between MIN_BYTES and
MAX_BYTES. The pixels are drawn from a seeded generator per image (a smooth
colour field, mid-frequency texture and fine grain), so the same seed gives
the same pictures (given the same libjpeg); the detail level is searched
per image until the JPEG size is in range. Prints one JSON line: {"files": N, "bytes": B, "seconds": S}.

Run by strata-bench (integration/workload/jpegfolder.go) with
/usr/bin/python3 and Debian's python3-pil and python3-numpy.
"""

import argparse
import io
import json
import multiprocessing
import os
import sys
import time

import numpy as np
from PIL import Image

# ImageNet-like sizes (width, height): the common shapes of its photos.
SIZES = [(500, 375), (375, 500), (500, 333), (333, 500), (500, 400),
         (640, 480), (500, 356), (450, 500), (500, 500), (400, 300)]
QUALITY = 90

# Detail level to start each image's search from, per size: found once on
# a calibration image, so that the bytes do not depend on which worker
# process made which image before.
_start = {}


def _upscale(rng, w, h, cells_w, cells_h, scale):
    """Random colour cells blown up to w x h (bicubic): smooth structure."""
    small = rng.integers(0, 256, size=(cells_h, cells_w, 3), dtype=np.uint8)
    img = Image.fromarray(small, "RGB").resize((w, h), Image.BICUBIC)
    return (np.asarray(img, dtype=np.float32) - 128.0) * scale


def _pixels(seed, index, w, h):
    """The image's layers (fixed per seed and index), mixed by detail."""
    rng = np.random.default_rng([seed, index])
    base = _upscale(rng, w, h, 6, 5, 1.0) + 128.0
    texture = _upscale(rng, w, h, w // 6, h // 6, 1.0)
    grain = rng.normal(0.0, 64.0, size=(h, w, 3)).astype(np.float32)
    return base, texture, grain


def _encode(layers, detail):
    base, texture, grain = layers
    px = base + texture * min(1.0, detail) + grain * detail
    img = Image.fromarray(np.clip(px, 0, 255).astype(np.uint8), "RGB")
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=QUALITY)
    return buf.getvalue()


def _search(layers, lo, hi, detail):
    """Encode at detail levels until the size is in [lo, hi]: step from
    the start until the range is bracketed, then bisect (the size grows
    with the detail). Returns (data, detail)."""
    d_lo = d_hi = None
    data = b""
    for _ in range(40):
        data = _encode(layers, detail)
        if lo <= len(data) <= hi:
            return data, detail
        if len(data) < lo:
            d_lo = detail
            detail = detail * 1.25 if d_hi is None else (d_lo + d_hi) / 2
        else:
            d_hi = detail
            detail = detail / 1.25 if d_lo is None else (d_lo + d_hi) / 2
    raise SystemExit(f"no detail level gives {lo}-{hi} bytes (last {len(data)})")


def _size(seed, index):
    return SIZES[np.random.default_rng([seed, index, 1]).integers(len(SIZES))]


def calibrate(seed, lo, hi):
    """The start detail per size, from one calibration image each."""
    out = {}
    for k, (w, h) in enumerate(SIZES):
        _, out[(w, h)] = _search(_pixels(seed + 7919, k, w, h), lo, hi, 0.5)
    return out


def _init(start):
    _start.update(start)


def make(job):
    """Write image index; return its size in bytes."""
    out, seed, index, classes, lo, hi = job
    w, h = _size(seed, index)
    data, _ = _search(_pixels(seed, index, w, h), lo, hi, _start[(w, h)])
    path = os.path.join(out, "class%03d" % (index % classes), "img%06d.jpg" % index)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--files", type=int, required=True)
    p.add_argument("--classes", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--min-bytes", type=int, default=100 << 10)
    p.add_argument("--max-bytes", type=int, default=150 << 10)
    p.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    a = p.parse_args()
    if a.files <= 0 or a.classes <= 0 or not 0 < a.min_bytes < a.max_bytes:
        p.error("need files > 0, classes > 0 and 0 < min-bytes < max-bytes")
    for c in range(a.classes):
        os.makedirs(os.path.join(a.out, "class%03d" % c), exist_ok=True)
    start = time.monotonic()
    jobs = [(a.out, a.seed, i, a.classes, a.min_bytes, a.max_bytes) for i in range(a.files)]
    total = 0
    start_detail = calibrate(a.seed, a.min_bytes, a.max_bytes)
    with multiprocessing.Pool(max(1, a.procs), initializer=_init, initargs=(start_detail,)) as pool:
        for n, size in enumerate(pool.imap(make, jobs, chunksize=8), 1):
            total += size
            if n % 500 == 0:
                print(f"{n}/{a.files} images", file=sys.stderr, flush=True)
    print(json.dumps({"files": a.files, "bytes": total, "seconds": time.monotonic() - start}))


if __name__ == "__main__":
    main()
