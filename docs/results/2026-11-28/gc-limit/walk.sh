#!/bin/sh
# A walk of a directory of N files on a mount with default flags: `ls -f`,
# then os.scandir and os.stat of every file (an ImageFolder scan that
# stats), timed, with the daemon's CPU (utime+stime ticks), its collections
# (GODEBUG=gctrace=1) and peak RSS. Each binary given is run in turn,
# ROUNDS times. Usage (root; N empty files made once under a temp dir):
#   docs/results/2026-11-28/gc-limit/walk.sh N ROUNDS BINARY...
set -e
n=$1; rounds=$2; shift 2
w=$(mktemp -d); mkdir -p "$w/src" "$w/mnt"
python3 -c "
import os, sys
for i in range(int(sys.argv[2])):
    open(os.path.join(sys.argv[1], 'train_%09d.jpg' % i), 'wb').close()
" "$w/src" "$n"
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -rf "$w/c"; sync; echo 3 > /proc/sys/vm/drop_caches
    GODEBUG=gctrace=1 setsid "$bin" mount "file://$w/src" "$w/mnt" --cache-dir "$w/c" --foreground > "$w/log" 2>&1 &
    sleep 2
    pid=$(pgrep -f "mount file://$w/src")
    t0=$(date +%s.%N)
    ls -f "$w/mnt" > /dev/null
    python3 -c "
import os, sys
d = sys.argv[1]
for e in os.scandir(d):
    os.stat(os.path.join(d, e.name))
" "$w/mnt"
    t1=$(date +%s.%N)
    printf '%s round %s: walk %.1f s, daemon CPU %s ticks, %s collections, peak RSS %s kB\n' "$bin" "$r" \
      "$(echo "$t1 - $t0" | bc)" "$(awk '{print $14+$15}' /proc/$pid/stat)" "$(grep -c '^gc ' "$w/log")" \
      "$(awk '/VmHWM/{print $2}' /proc/$pid/status)"
    fusermount3 -u "$w/mnt"; sleep 2
  done
done
rm -rf "$w"
