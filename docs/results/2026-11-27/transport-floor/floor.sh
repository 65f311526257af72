#!/bin/bash
# floor.sh: what a warm small-file epoch costs through FUSE on this machine,
# for Strata and for go-fuse's own passthrough loopback, beside local disk,
# and the round trip of a trivial request in go-fuse and in libfuse.
# Run from the repository root as root, after `make build tools`; needs
# gcc and libfuse3-dev for the libfuse comparison. Writes to $W (default
# /tmp/floor). Usage: docs/results/2026-11-27/transport-floor/floor.sh [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(pwd)
rounds=${1:-5}
W=${W:-/tmp/floor}
export AWS_ACCESS_KEY_ID=floor AWS_SECRET_ACCESS_KEY=floorfloor
mkdir -p "$W"/{local,minio/floor,cache,strata,loopback,gofuse,libfuse}
cleanup() {
  for m in strata loopback gofuse libfuse; do umount "$W/$m" 2>/dev/null || true; done
  kill "${pids[@]}" 2>/dev/null || true
}
pids=()
trap cleanup EXIT

echo "== dataset: 4,000 files of 128 KiB in 10 directories"
python3 - "$W/local" <<'PY'
import os, sys
for c in range(10):
    d = os.path.join(sys.argv[1], "train", "c%02d" % c)
    os.makedirs(d, exist_ok=True)
    for i in range(400):
        p = os.path.join(d, "img%04d.jpg" % i)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(os.urandom(128 * 1024))
PY

MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY \
  "$repo/bin/minio" server --quiet --address 127.0.0.1:9190 "$W/minio" >"$W/minio.log" 2>&1 &
pids+=($!)
sleep 3
mount_strata() {
  "$repo/bin/strata" mount s3://floor "$W/strata" --endpoint-url http://127.0.0.1:9190 \
    --force-path-style --cache-dir "$W/cache" "$@"
}
if [ ! -e "$W/cache/.filled" ]; then
  mount_strata --upload async --upload-delay 0
  cp -r "$W/local/train" "$W/strata/"
  "$repo/bin/strata" sync "$W/strata"
  umount "$W/strata"
  touch "$W/cache/.filled"
fi
mount_strata # default flags: what the epochs below measure
python3 "$here/epoch.py" "$W/strata" 8 >/dev/null # warm: every file cached and registered

go build -o "$W/loopback-bin" github.com/hanwen/go-fuse/v2/example/loopback
"$W/loopback-bin" -q -directmount "$W/loopback" "$W/local" &
pids+=($!)
go build -o "$W/gofuse-stat-bin" "$here/_gofuse-stat"
"$W/gofuse-stat-bin" "$W/gofuse" &
pids+=($!)
gcc -O2 -o "$W/libfuse-stat-bin" "$here/libfuse-stat.c" $(pkg-config --cflags --libs fuse3)
"$W/libfuse-stat-bin" "$W/libfuse" &
pids+=($!)
sleep 1

cpu_of() { awk '{print $14+$15}' "/proc/$1/stat"; }
spid=$(pgrep -f "strata mount s3://floor" | head -1)
lpid=$(pgrep -f "loopback-bin -q" | head -1)
echo "== warm epochs, 8 reader processes (files/s; daemon CPU per file in µs)"
for r in $(seq "$rounds"); do
  l=$(python3 "$here/epoch.py" "$W/local" 8)
  a=$(cpu_of "$lpid"); lb=$(python3 "$here/epoch.py" "$W/loopback" 8); b=$(cpu_of "$lpid")
  c=$(cpu_of "$spid"); s=$(python3 "$here/epoch.py" "$W/strata" 8); d=$(cpu_of "$spid")
  awk -v r="$r" -v l="$l" -v lb="$lb" -v s="$s" -v lc=$((b - a)) -v sc=$((d - c)) 'BEGIN {
    printf "round %d: local %d, go-fuse loopback %d (%.2fx, %d us/file), strata %d (%.2fx, %d us/file)\n",
      r, l, lb, lb / l, lc * 10000 / 4000, s, s / l, sc * 10000 / 4000 }'
done
echo "== the same epochs opened with buffering=0: no isatty(), so no IOCTL round trip (files/s)"
for r in $(seq "$rounds"); do
  l=$(python3 "$here/epoch.py" "$W/local" 8 unbuffered)
  s=$(python3 "$here/epoch.py" "$W/strata" 8 unbuffered)
  awk -v r="$r" -v l="$l" -v s="$s" 'BEGIN { printf "round %d: local %d, strata %d (%.2fx)\n", r, l, s, s / l }'
done
echo "== one reader, median microseconds per step"
for m in local loopback strata; do echo "$m: $(python3 "$here/steps.py" "$W/$m")"; done
echo "== trivial round trips: microseconds per stat (a LOOKUP and a GETATTR), 1 and 8 processes"
for r in $(seq 3); do
  for m in gofuse libfuse; do echo "$m: $(python3 "$here/stat.py" "$W/$m" 1) $(python3 "$here/stat.py" "$W/$m" 8)"; done
done
