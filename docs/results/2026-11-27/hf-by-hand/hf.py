import os, sys, time, json, struct, subprocess, urllib.request
sys.path.insert(0, "/work/main/integration/workload/python")
import checkpoint as ck
import torch
root, steps, fsync = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
size = 2 << 30
model = ck.state_dict(size // 3, 1)
optim = {"state": ck.state_dict(size - size // 3, 2), "param_groups": [{"lr": 1e-4}]}
def metrics():
    try:
        t = urllib.request.urlopen("http://127.0.0.1:9464/metrics").read().decode()
    except Exception:
        return {}
    out = {}
    for l in t.splitlines():
        if l.startswith("strata_fuse_op_duration_seconds_count") or l.startswith("strata_fuse_op_duration_seconds_sum"):
            k, v = l.rsplit(" ", 1); out[k] = float(v)
    return out
def timed_write(path, fn):
    t0 = time.monotonic(); f = open(path, "wb"); t1 = time.monotonic()
    fn(f); f.flush(); t2 = time.monotonic()
    if fsync: os.fsync(f.fileno())
    f.close(); t3 = time.monotonic()
    return (t1 - t0, t2 - t1, t3 - t2)
for step in range(1, steps + 1):
    if not fsync:
        while True:
            out = subprocess.run(["/work/main/bin/strata", "uploads", root], capture_output=True, text=True).stdout
            if len(out.strip().splitlines()) <= 1: break
            time.sleep(0.1)
    os.sync(); open("/proc/sys/vm/drop_caches", "w").write("3\n")
    m0 = metrics()
    tmp = os.path.join(root, f"tmp-checkpoint-{step}")
    t0 = time.monotonic()
    os.makedirs(tmp, exist_ok=True)
    r = []
    r.append(timed_write(os.path.join(tmp, "model.safetensors"), ck.safetensors(model)))
    r.append(timed_write(os.path.join(tmp, "optimizer.pt"), lambda f: torch.save(optim, f)))
    r.append(timed_write(os.path.join(tmp, "scheduler.pt"), lambda f: torch.save({"a": step}, f)))
    r.append(timed_write(os.path.join(tmp, "rng_state.pth"), lambda f: torch.save({"cpu": torch.get_rng_state()}, f)))
    r.append(timed_write(os.path.join(tmp, "trainer_state.json"), lambda f: f.write(b"{}")))
    total = time.monotonic() - t0
    os.rename(tmp, os.path.join(root, f"checkpoint-{step}"))
    import shutil
    cks = sorted((x for x in os.listdir(root) if x.startswith("checkpoint-")), key=lambda x: int(x.split("-")[1]))
    while len(cks) > 2:
        shutil.rmtree(os.path.join(root, cks.pop(0)))
    m1 = metrics()
    d = {}
    for k in m1:
        dv = m1[k] - m0.get(k, 0)
        if dv <= 0: continue
        op = k.split('"')[1]
        if "_count" in k: d.setdefault(op, [0, 0])[0] = int(dv)
        else: d.setdefault(op, [0, 0])[1] = round(dv * 1000, 1)
    print(f"step {step}: total {total:.3f}s  " + " | ".join(f"{a*1000:.0f}/{b*1000:.0f}/{c*1000:.0f}" for a, b, c in r[:3]), d if d else "", flush=True)
