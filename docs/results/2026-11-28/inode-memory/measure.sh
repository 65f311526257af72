#!/bin/sh
# Daemon memory for the files the kernel knows: mount a file:// source
# holding N empty files in one directory (default flags), list it once,
# read the daemon's peak and current RSS and its Go heap, then let the
# kernel drop its dentries and inodes (FORGETs) and read the RSS again.
# Usage (root, from the repository root, after make build):
#   docs/results/2026-11-28/inode-memory/measure.sh [N]
set -e
n=${1:-500000}
w=$(mktemp -d)
mkdir -p "$w/src" "$w/mnt"
python3 -c "
import os, sys
for i in range(int(sys.argv[2])):
    open(os.path.join(sys.argv[1], 'train_%09d.jpg' % i), 'wb').close()
" "$w/src" "$n"
STRATA_PPROF=127.0.0.1:6061 setsid bin/strata mount "file://$w/src" "$w/mnt" --cache-dir "$w/cache" > "$w/log" 2>&1 &
sleep 2
pid=$(pgrep -f "strata mount file://$w/src")
echo "files: $n; listed: $(ls -f "$w/mnt" | wc -l)"
sleep 2
grep -E 'VmHWM|VmRSS' /proc/$pid/status | tr -s ' \t' ' '
curl -s "http://127.0.0.1:6061/debug/pprof/heap?gc=1" > "$w/heap.pb.gz"
go tool pprof -sample_index=inuse_space -top -nodecount=12 "$w/heap.pb.gz" 2>/dev/null | sed -n "5,19p"
sync; echo 2 > /proc/sys/vm/drop_caches; sleep 5
echo "after the kernel dropped its dentries: $(grep VmRSS /proc/$pid/status | tr -s ' \t' ' ')"
fusermount3 -u "$w/mnt"; sleep 1; rm -rf "$w"
