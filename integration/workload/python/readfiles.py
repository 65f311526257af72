"""One reader process of strata-bench's small-file workloads, in Python.

The outside reader the benchmark's published figures use: each file is
read the way a PyTorch Dataset's __getitem__ reads a sample, with
builtins.open(path, "rb") (which, before Python 3.14, also issues the
isatty ioctl), read() in chunks of buf_size to EOF, close.

Speaks the protocol of the bench's Go workers (integration/workload/
worker.go): one JSON task line on stdin ({"op": "read", "paths": [...],
"sizes": [...], "sha256": [...], "buf_size": N, "max_duration": ns}),
"ready" on stdout, then on "go" it reads every path in order and prints
one JSON result line: ops, bytes, verified, start_ns, end_ns (Unix ns,
the clock the Go workers use too), lat_ns (one per file), truncated, err.
"""

import hashlib
import json
import sys
import time


def main():
    task = json.loads(sys.stdin.readline())
    if task.get("op") != "read":
        print(json.dumps({"err": f"readfiles.py: op {task.get('op')!r} is not read"}), flush=True)
        return
    paths = task.get("paths") or []
    sizes = task.get("sizes") or []
    sums = task.get("sha256") or []
    buf = task.get("buf_size") or 128 << 10
    cap_ns = task.get("max_duration") or 0
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    res = {"ops": 0, "bytes": 0, "verified": 0, "lat_ns": [], "truncated": False}
    start = time.time_ns()
    res["start_ns"] = start
    try:
        for i, p in enumerate(paths):
            if cap_ns and time.time_ns() - start >= cap_ns:
                res["truncated"] = True
                break
            t0 = time.perf_counter_ns()
            h = hashlib.sha256() if i < len(sums) and sums[i] else None
            n = 0
            with open(p, "rb") as f:
                while True:
                    chunk = f.read(buf)
                    if not chunk:
                        break
                    n += len(chunk)
                    if h:
                        h.update(chunk)
            res["lat_ns"].append(time.perf_counter_ns() - t0)
            if i < len(sizes) and n != sizes[i]:
                raise ValueError(f"{p}: read {n} bytes, want {sizes[i]}")
            if h:
                if h.hexdigest() != sums[i]:
                    raise ValueError(f"{p}: sha256 differs from the manifest")
                res["verified"] += 1
            res["ops"] += 1
            res["bytes"] += n
    except Exception as e:  # reported to the bench, which fails the phase
        res["err"] = str(e)
    res["end_ns"] = time.time_ns()
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
