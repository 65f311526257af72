"""torch.save of a 1 GiB state dict (256 float32 tensors of 4 MiB) to the
same path REPS times, the page cache dropped before each: the first save
creates the file, the others rewrite it (open(O_WRONLY|O_CREAT|O_TRUNC)).
On local disk each save ends with an fsync (what an async Strata close
guarantees: the bytes durable on the cache disk). Prints seconds per save."""
import os
import sys
import time

import torch

path, reps, fsync = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "fsync"
torch.manual_seed(0)
sd = {"w%d" % i: torch.randn((64 << 20) // 4 // 16) for i in range(256)}
out = []
for _ in range(reps):
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
    t = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(sd, f)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    out.append(time.perf_counter() - t)
print(" ".join("%.2f" % x for x in out))
