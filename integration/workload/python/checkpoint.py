"""Checkpoints written the way trainers write them (strata-bench).

One process, like a training job, serves requests read on stdin, one JSON
object a line, and answers each with one JSON line on stdout:

  {"op": "save", "path": P, "size": B, "seed": S, "fsync": F}
      torch.save of a state dict of about B bytes of float32 tensors
      (deterministic from S) to P. "close_s" is the time until torch.save
      returned and the file was closed (after os.fsync when F: the
      local-disk baseline).
  {"op": "load", "path": P, "size": B, "seed": S}
      torch.load of P; "load_s" its time, "equal" whether every tensor
      equals the one saved with the same size and seed (compared after the
      clock stops, one regenerated tensor at a time), "sha256" of the file
      read back (untimed).
  {"op": "hf", "root": R, "step": N, "size": B, "seed": S, "fsync": F,
   "keep": K}
      The Hugging Face Trainer's save: model.safetensors (a third of B, in
      the safetensors layout: 8-byte header length, JSON header, raw
      tensors), optimizer.pt (torch.save of the rest, Adam's two moments),
      scheduler.pt, rng_state.pth and trainer_state.json written into
      R/tmp-checkpoint-N/, os.rename to R/checkpoint-N, then shutil.rmtree
      of the oldest checkpoint-* while more than K remain (the Trainer's
      save_total_limit). "write_s", "rename_s" and "rmtree_s" are the three
      steps' times, "files" the names under checkpoint-N with their sizes,
      "removed" the directories deleted.

Run by strata-bench (integration/workload/checkpoint.go) as
/usr/bin/python3 with Debian's python3-torch.
"""

import argparse
import hashlib
import io
import json
import os
import shutil
import struct
import sys
import time

import torch

CHUNK = 16 << 20  # bytes per tensor (a 2048x2048 float32 weight)


def shapes(size):
    """Tensor names and shapes of a state dict of about size bytes."""
    out, left = [], max(size, 4096)
    while left >= 4:
        n = min(CHUNK, left) // 4
        shape = (n // 2048, 2048) if n >= 2048 else (n,)
        out.append((f"layers.{len(out)}.weight", shape))
        left -= (shape[0] * shape[1] if len(shape) == 2 else n) * 4
    return out


def tensor(seed, i, shape):
    g = torch.Generator()
    g.manual_seed(seed * 100003 + i)
    return torch.randn(shape, generator=g)


_last = {}


def state_dict(size, seed):
    """The state dict of size and seed (the last two are kept: a trainer
    saves the tensors it holds)."""
    key = (size, seed)
    if key not in _last:
        if len(_last) >= 2:
            _last.pop(next(iter(_last)))
        _last[key] = _make(size, seed)
    return _last[key]


def _make(size, seed):
    return {name: tensor(seed, i, shape) for i, (name, shape) in enumerate(shapes(size))}


def write_file(path, data, fsync):
    """Writes bytes or calls data(f); closes (after fsync when asked)."""
    with open(path, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def save(req):
    sd = state_dict(req["size"], req["seed"])
    nbytes = sum(t.numel() * 4 for t in sd.values())
    t0 = time.monotonic()
    write_file(req["path"], lambda f: torch.save(sd, f), req.get("fsync", False))
    close = time.monotonic() - t0
    return {"close_s": close, "bytes": os.path.getsize(req["path"]), "tensor_bytes": nbytes,
            "tensors": len(sd)}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def load(req):
    t0 = time.monotonic()
    sd = torch.load(req["path"])
    took = time.monotonic() - t0
    want = shapes(req["size"])
    equal = list(sd.keys()) == [n for n, _ in want]
    if equal:
        for i, (name, shape) in enumerate(want):
            if not torch.equal(sd[name], tensor(req["seed"], i, shape)):
                equal = False
                break
    del sd
    return {"load_s": took, "equal": equal, "sha256": sha256(req["path"]),
            "bytes": os.path.getsize(req["path"])}


def safetensors(sd):
    """The safetensors file layout, written by hand (no extra package)."""
    header, off = {}, 0
    for name, t in sd.items():
        n = t.numel() * 4
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)

    def write(f):
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for t in sd.values():
            f.write(t.numpy().data)
    return write


def hf(req):
    root, step, size, seed = req["root"], req["step"], req["size"], req["seed"]
    fsync = req.get("fsync", False)
    model = state_dict(size // 3, seed)
    optim = {"state": state_dict(size - size // 3, seed + 1),
             "param_groups": [{"lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0}]}
    sched = {"last_epoch": step, "_step_count": step + 1, "base_lrs": [1e-4]}
    state = {"global_step": step, "epoch": step / 10.0,
             "log_history": [{"step": s, "loss": 1.0 / s} for s in range(1, step + 1)]}
    rng = {"python": step, "cpu": torch.get_rng_state()}
    tmp = os.path.join(root, f"tmp-checkpoint-{step}")
    final = os.path.join(root, f"checkpoint-{step}")
    t0 = time.monotonic()
    os.makedirs(tmp, exist_ok=True)
    write_file(os.path.join(tmp, "model.safetensors"), safetensors(model), fsync)
    write_file(os.path.join(tmp, "optimizer.pt"), lambda f: torch.save(optim, f), fsync)
    write_file(os.path.join(tmp, "scheduler.pt"), lambda f: torch.save(sched, f), fsync)
    write_file(os.path.join(tmp, "rng_state.pth"), lambda f: torch.save(rng, f), fsync)
    write_file(os.path.join(tmp, "trainer_state.json"), json.dumps(state, indent=2).encode(), fsync)
    t1 = time.monotonic()
    os.rename(tmp, final)
    t2 = time.monotonic()
    ckpts = sorted((d for d in os.listdir(root) if d.startswith("checkpoint-")),
                   key=lambda d: int(d.split("-")[1]))
    removed = []
    while len(ckpts) > req.get("keep", 2):
        shutil.rmtree(os.path.join(root, ckpts[0]))
        removed.append(ckpts.pop(0))
    t3 = time.monotonic()
    files = {n: os.path.getsize(os.path.join(final, n)) for n in sorted(os.listdir(final))}
    return {"write_s": t1 - t0, "rename_s": t2 - t1, "rmtree_s": t3 - t2, "files": files,
            "removed": removed, "checkpoints": ckpts}


OPS = {"save": save, "load": load, "hf": hf}


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    print(json.dumps({"ready": True, "torch": torch.__version__}), flush=True)
    for line in sys.stdin:
        if line.strip():
            req = json.loads(line)
            print(json.dumps(OPS[req["op"]](req)), flush=True)


if __name__ == "__main__":
    main()
