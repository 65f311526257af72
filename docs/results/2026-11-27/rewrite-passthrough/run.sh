#!/bin/bash
# run.sh OLD_STRATA NEW_STRATA ROUNDS: torch.save rewrites on local disk and
# on an --upload async mount, with two strata binaries alternating. Needs a
# MinIO at 127.0.0.1:9100 (minioadmin) with a bucket "ckb", /usr/bin/python3
# with torch (python3-torch), root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=$1 new=$2 rounds=${3:-3}
export AWS_ACCESS_KEY_ID=minioadmin AWS_SECRET_ACCESS_KEY=minioadmin
W=${W:-/tmp/ckrun}
mkdir -p "$W/local" "$W/mnt"
for r in $(seq "$rounds"); do
  echo "round $r local: $(/usr/bin/python3 "$here/save.py" "$W/local/model.pt" 4 fsync)"
  for bin in "$old" "$new"; do
    rm -rf "$W/cache"
    "$bin" mount s3://ckb "$W/mnt" --endpoint-url http://127.0.0.1:9100 --force-path-style \
      --cache-dir "$W/cache" --upload async
    echo "round $r $bin: $(/usr/bin/python3 "$here/save.py" "$W/mnt/model.pt" 4 nofsync)"
    "$new" sync "$W/mnt" >/dev/null
    umount "$W/mnt"
    sleep 1
  done
done
