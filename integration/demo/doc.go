// Command strata-demo is `make demo`: it shows in about a minute what
// Strata is for. It generates a dataset (a few thousand ~128 KiB files in
// class directories plus a few large files), starts a local MinIO (or
// fake-gcs-server with -backend gcs), uploads the dataset, mounts the
// bucket with `strata mount`, reads every file twice in shuffled order with
// several reader processes (dropping the page cache before each epoch when
// permitted, so that epoch 2 measures the disk cache, not RAM), reads the
// source directory the same way for comparison, and prints a short report
// with files/s, MB/s, latency and the cache hit ratio from `strata cache
// stats --json`. It unmounts, stops the server and removes its files on
// the way out, also after Ctrl-C or a failure.
//
// It owns the demo flow (demo.go), its flags (main.go) and the report
// (report.go); datasets, servers, mounts and reader processes come from
// integration/workload.
package main
