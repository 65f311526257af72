// Package workload is the reusable part of Strata's benchmark and demo: it
// owns everything that does not depend on which filesystem is measured.
//
//   - Datasets (dataset.go, generate.go): deterministic trees generated from a
//     seed: ImageFolder-like small files in class directories,
//     WebDataset-like tar shards, one big random-access file, a listing
//     tree of many tiny objects, and a JPEG ImageFolder made by
//     Python (jpegfolder.go, python/jpegfolder.py: PIL, ImageNet-like sizes,
//     100-150 KiB). The same seed gives the same bytes on every machine (the
//     JPEGs: with the same libjpeg); a manifest records size and sha256 of
//     every file.
//   - Servers (servers.go, toxiproxy.go): MinIO, fake-gcs-server and
//     toxiproxy started as child processes (proc.go) from the repository's
//     ./bin, for standalone programs (Go tests elsewhere use
//     internal/testserver).
//   - Upload (upload.go): a parallel uploader to S3 (AWS SDK v2) and to the
//     GCS JSON API.
//   - Mounts (mount.go, mounters.go): strata, rclone and s3fs mounts run as
//     child processes (or, for strata, the daemonizing command users type),
//     with readiness and clean unmount; `strata cache stats --json` is read
//     by stratastats.go.
//   - Readers (worker.go, readers.go, ops.go): the measured reads run in
//     separate OS processes, like DataLoader workers: the calling binary is
//     re-executed with a hidden worker argument (MaybeRunWorker must be the
//     first thing main and TestMain do). Per-operation latency is recorded
//     and summarised (stats.go) as p50/p99, files/s, MB/s and ops/s.
//   - The PyTorch DataLoader (dataloader.go, python.go,
//     python/dataloader.py): torchvision's ImageFolder and a DataLoader run
//     by /usr/bin/python3 (or $STRATA_BENCH_PYTHON) in a process of its own
//     that runs an epoch per request; the Python programs are embedded in
//     the binary and run in their own process group.
//   - WebDataset tar shards in Python (tarshards.go,
//     python/tarshards.py): the shards streamed with tarfile's "r|" mode in
//     DataLoader workers over an IterableDataset, an epoch per request;
//     WebDatasetSpec.ShardContents says how many samples and member bytes
//     the generator put in a shard, for checking that every one was read.
//   - MLPerf Storage-style accelerator utilisation (au.go, python/au.py):
//     N emulated accelerators, each a DataLoader over its share of the files
//     sleeping a fixed compute time per batch; AU = compute / wall time.
//   - Checkpoints (checkpoint.go, python/checkpoint.py): the real
//     torch.save and torch.load, and the Hugging Face Trainer's
//     tmp-checkpoint-N/ + rename + rmtree, run by one Python process per
//     request stream; writer.go polls the bucket until it holds an object
//     whole or exactly a set of objects, and sends the plain multipart
//     upload the in-bucket rows are compared with.
//   - The plain ranged-GET client (getclient.go), the reference for what the
//     server can deliver, and machine facts (machine.go, pagecache.go).
//
// MB means 10^6 bytes throughout (as fio reports); MiB means 2^20.
//
// Locking: Proc's mutex guards its exit status only, a Python program's
// stderr buffer's mutex that buffer (written by exec's copying goroutine);
// Generate, Upload and the GET client collect results under short
// function-local mutexes. No lock is ever held across I/O or while waiting
// on a process, and there is no lock order to respect.
package workload
