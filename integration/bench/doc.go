// Command strata-bench is Strata's benchmark (`make bench`): it measures
// Strata side by side with the local disk, rclone, s3fs and a plain
// parallel ranged-GET client (and Strata as a second node on a shared
// tier, and with --upload async for the checkpoint write), on the same
// data, in one run, and reports ratios.
//
// It owns the orchestration: scales and flags (config.go), the servers and
// the uploaded dataset (env.go), the systems under test (systems.go), the
// workloads and their phases (workloads.go, dataloader.go, au.go,
// imagefolder.go, sequential.go, tarshards.go, random.go, listing.go, checkpoint.go; secondnode.go is the
// shared-tier system), the results table with ratios and the issue #3
// targets (rows.go, table.go, targets.go) and the PNG chart (chart.go).
// The reusable parts (datasets, reader processes, mounts, servers) live in
// integration/workload.
//
// Adding a row: a new workload implements Workload (see workloads.go; a
// writing workload also implements Writer to get read-write mounts) and is
// listed in allWorkloads; a new system (a second node on a shared cache
// tier, say) is a System with an Open function, listed in allSystems. Rows
// of systems with the subject role get ratios against local disk, the best
// peer and the GET client of the same workload, phase and latency; a
// Target in targets.go turns a ratio into a printed bar.
//
// Usage (the Makefile builds everything first):
//
//	make bench                                 # -workloads training: DataLoader, AU, Python shards, checkpoints (32.5 min on 2 cores)
//	make bench-paths                           # -workloads paths: ImageFolder, shards, random, listings
//	make bench-all                             # -workloads all: both (84 min on 2 cores)
//	make bench-quick                           # every workload at a small scale: one 20 ms block, one run per phase
//	make bench BENCH_FLAGS='-workloads imagefolder -systems local,strata -latencies 20ms'
//	make bench BENCH_FLAGS='-backend gcs'      # the reads over fake-gcs-server (strata rows only)
//	make bench BENCH_FLAGS='-workloads checkpoint'   # torch.save and Hugging Face checkpoints (issues #13, #18)
//	make bench BENCH_FLAGS='-workloads dataloader'   # issue #18's PyTorch DataLoader
//	make bench BENCH_FLAGS='-workloads webdataset-py'   # issue #18's WebDataset tar shards in Python
//	make bench BENCH_FLAGS='-workloads au-resnet50'     # issue #18's MLPerf Storage-style AU search
//	bin/strata-bench -h                        # every flag; STRATA_BENCH_* env vars set defaults
//
// -workloads takes workload names and the sets of workloadSets (training,
// paths) or all. Each report says where its time went ("time spent");
// docs/benchmarks.md section 4 gives the published runs' times.
//
// Results go to stdout and to -out (results.md, results.json, and a
// chart-FAMILY.png per workload family); progress goes to stderr. Data, the MinIO drive and logs stay in -workdir
// and are reused by the next run with the same scale and seed.
//
// Every timed read runs in separate reader processes (this binary
// re-executed; for the DataLoader, webdataset-py and au-resnet50, Debian's python3
// running PyTorch), with
// the page cache dropped before each phase (before each run of the
// DataLoader's). A workload that needs more than the systems implements
// Prerequisite: without it (PyTorch missing, say) it is skipped and the
// report says why. Nothing is asserted: figures are printed.
package main
