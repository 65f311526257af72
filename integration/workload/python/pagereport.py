"""How the VM's free page reporting moves a write benchmark (needs root).

On a VM whose virtio balloon offers free page reporting, the guest hands
free memory back to the host (mm/page_reporting.c); memory used again
after that faults on the host. A benchmark that writes files into the page
cache then runs fast or slow depending on what the run before it freed.

This fills and frees CHURN MiB of page cache (what a phase before does),
drops the page cache (as the bench does before every phase), waits
WAIT seconds, then writes SIZE MiB in 1 MiB writes to DIR/pagereport.bin,
fsyncs, closes and removes it, ROUNDS times with reporting as the machine has it,
then ROUNDS times with it held off (page_reporting_order above the largest
buddy order, 10), and restores the order it found. One line per round: the
order, the write time, the fsync time and the median 1 MiB write.

Usage: pagereport.py [--size MiB] [--churn MiB] [--rounds N] [--wait S] DIR
"""

import argparse
import os
import statistics
import time

KNOB = "/sys/module/page_reporting/parameters/page_reporting_order"


def churn(path, mib):
    """Fill mib MiB of page cache and free it, as a benchmark phase before
    this one does (its files written or read, then the cache dropped)."""
    buf = b"\0" * (1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(mib):
        os.write(fd, buf)
    os.fsync(fd)
    os.close(fd)
    os.remove(path)


def one_round(path, size_mib, wait, churn_mib):
    if churn_mib:
        churn(path + ".churn", churn_mib)
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    time.sleep(wait)
    buf = os.urandom(1 << 20)
    lat = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(size_mib):
        a = time.perf_counter()
        os.write(fd, buf)
        lat.append(time.perf_counter() - a)
    t1 = time.perf_counter()
    os.fsync(fd)
    t2 = time.perf_counter()
    os.close(fd)
    os.remove(path)
    os.sync()
    return t1 - t0, t2 - t1, statistics.median(lat)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--size", type=int, default=2048, help="MiB per round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--churn", type=int, default=8192, help="MiB of page cache filled and freed before each round")
    ap.add_argument("--wait", type=float, default=5, help="seconds between the drop and the writes")
    a = ap.parse_args()
    with open(KNOB) as f:
        found = f.read().strip()
    path = os.path.join(a.dir, "pagereport.bin")
    print(f"# {a.churn} MiB of page cache filled and freed, page cache dropped, {a.wait:g} s, then {a.size} MiB in 1 MiB writes + fsync per round, file removed after each; "
          f"{os.uname().release}; page_reporting_order found: {found}")
    print(f"{'reporting':>22} {'round':>5} {'writes s':>9} {'fsync s':>8} {'p50 write us':>13}")
    try:
        for label, order in ((f"as found (order {found})", found), ("held off (order 11)", "11")):
            with open(KNOB, "w") as f:
                f.write(order)
            for i in range(a.rounds):
                w, s, p50 = one_round(path, a.size, a.wait, a.churn)
                print(f"{label:>22} {i:5d} {w:9.2f} {s:8.2f} {p50 * 1e6:13.0f}", flush=True)
    finally:
        with open(KNOB, "w") as f:
            f.write(found)


if __name__ == "__main__":
    main()
