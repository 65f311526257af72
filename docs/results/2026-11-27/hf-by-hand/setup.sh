#!/bin/bash
# manual HF-step experiment: MinIO on :9100, strata async mount on /tmp/hfx/mnt
set -e
cd /work/main
export AWS_ACCESS_KEY_ID=minioadmin AWS_SECRET_ACCESS_KEY=minioadmin
pkill -f "minio server --address 127.0.0.1:9100" || true
rm -rf /tmp/hfx/minio /tmp/hfx/cache; mkdir -p /tmp/hfx/minio/ckb /tmp/hfx/mnt /tmp/hfx/cache
MINIO_ROOT_USER=minioadmin MINIO_ROOT_PASSWORD=minioadmin nohup bin/minio server --quiet --address 127.0.0.1:9100 /tmp/hfx/minio > /tmp/hfx/minio.log 2>&1 &
sleep 3
nohup ${STRATA:-bin/strata} mount --cache-dir /tmp/hfx/cache --foreground --endpoint-url http://127.0.0.1:9100 --force-path-style --region us-east-1 --read-only=false --upload async --metrics-addr 127.0.0.1:9464 s3://ckb /tmp/hfx/mnt > /tmp/hfx/strata.out 2>&1 &
sleep 2
mount | grep /tmp/hfx/mnt
