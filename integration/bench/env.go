package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// Latency is one network condition: a toxiproxy proxy in front of MinIO.
type Latency struct {
	Delay time.Duration
	// Endpoint is the proxy's URL ("http://127.0.0.1:port").
	Endpoint string
}

// Name labels the latency in reports ("0ms", "20ms").
func (l Latency) Name() string { return fmt.Sprintf("%dms", l.Delay.Milliseconds()) }

// Env is the prepared benchmark: data on local disk, the same data in
// MinIO, and one proxy per latency.
type Env struct {
	Cfg Config
	// Manifest lists the files of every part (paths start with the
	// part's prefix).
	Manifest *workload.Manifest
	// parts maps a part's prefix to where it lives. Each definition of a
	// part (scale, seed) has its own directory and bucket, so that runs at
	// different scales never read each other's data.
	parts map[string]part
	order []string // prefixes in dataset order
	MinIO *workload.MinIO
	// GCS serves the data with -backend gcs (MinIO then holds only the
	// second node's shared tier).
	GCS     *workload.FakeGCS
	Toxi    *workload.Toxiproxy
	Lats    []Latency
	Machine workload.Machine
	// DropErr is set when the page cache cannot be dropped.
	DropErr error
	// Notes are facts about the run for the report.
	Notes []string
	// restorePageReporting undoes HoldOffPageReporting at Close.
	restorePageReporting func() error
	log                  func(format string, args ...any)
}

// part is one dataset part on disk and in MinIO.
type part struct {
	prefix string
	dir    string // the local root holding <prefix>/...
	bucket string
}

// PartDir is the local directory holding prefix/... (the local baseline
// reads dir/prefix).
func (e *Env) PartDir(prefix string) string { return e.parts[prefix].dir }

// Bucket is the bucket holding prefix/....
func (e *Env) Bucket(prefix string) string { return e.parts[prefix].bucket }

// setup generates and uploads the data of the selected workloads and
// starts MinIO and toxiproxy. Close undoes what it started.
func setup(ctx context.Context, cfg Config, wls []Workload, logf func(string, ...any)) (*Env, error) {
	e := &Env{Cfg: cfg, log: logf, parts: map[string]part{}, Manifest: &workload.Manifest{}}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	e.Machine = workload.DescribeMachine(cfg.WorkDir)
	logf("machine: %s", e.Machine)
	if e.DropErr = workload.DropPageCache(); e.DropErr != nil {
		logf("WARNING: %v; warm and cold figures may include RAM hits", e.DropErr)
		e.Notes = append(e.Notes, "page cache NOT dropped between phases (not permitted here)")
	}

	ds := workload.Dataset{Seed: cfg.Seed}
	for _, w := range wls {
		w.AddData(&ds, cfg.Scale)
	}
	for _, def := range ds.Parts() {
		prefix, hash := def.Prefixes()[0], def.Hash()
		p := part{prefix: prefix, dir: filepath.Join(cfg.WorkDir, "data", hash), bucket: "strata-bench-" + hash}
		t0 := time.Now()
		m, err := workload.Generate(ctx, p.dir, def, func(done, total int64) {
			logf("  generating %s: %s of %s", prefix, workload.FormatSize(done), workload.FormatSize(total))
		})
		if err != nil {
			return nil, err
		}
		e.parts[prefix] = p
		e.order = append(e.order, prefix)
		e.Manifest.Files = append(e.Manifest.Files, m.Files...)
		logf("dataset %s: %d files, %s in %s (%s)", prefix, len(m.Files), workload.FormatSize(workload.TotalSize(m.Files)),
			p.dir, time.Since(t0).Round(time.Millisecond))
	}

	minioDir := filepath.Join(cfg.WorkDir, "minio")
	var err error
	if e.MinIO, err = workload.StartMinIO(ctx, minioDir); err != nil {
		return nil, err
	}
	logf("minio: %s (drive %s)", e.MinIO.Endpoint, e.MinIO.DataDir)
	if cfg.Backend == "gcs" {
		gcsDir := filepath.Join(cfg.WorkDir, "gcs")
		if e.GCS, err = workload.StartFakeGCS(ctx, gcsDir); err != nil {
			e.Close()
			return nil, err
		}
		logf("fake-gcs-server: %s (data %s)", e.GCS.Endpoint, gcsDir)
		err = e.upload(ctx, gcsDir, "fake-gcs-server", e.GCS.MakeBucket, func(bucket string) workload.PutFunc {
			return workload.GCSPut(e.GCS.Endpoint, bucket)
		})
	} else {
		client := workload.NewS3Client(e.s3(e.MinIO.Endpoint))
		err = e.upload(ctx, minioDir, "MinIO", func(ctx context.Context, bucket string) error {
			return workload.EnsureBucket(ctx, client, bucket)
		}, func(bucket string) workload.PutFunc { return workload.S3Put(client, bucket) })
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	if err := e.scratchParts(ctx, wls); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.startProxies(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// scheme is the mounts' URL scheme.
func (e *Env) scheme() string {
	if e.GCS != nil {
		return "gs"
	}
	return "s3"
}

// s3 returns the client settings for an endpoint of this MinIO.
func (e *Env) s3(endpoint string) workload.S3Config {
	return workload.S3Config{Endpoint: endpoint, Region: e.MinIO.Region, AccessKey: e.MinIO.AccessKey, SecretKey: e.MinIO.SecretKey}
}

// upload puts the parts not uploaded before into the server, each in its
// own bucket (a marker file per bucket sits beside the server's data).
func (e *Env) upload(ctx context.Context, dataDir, server string, mkBucket func(context.Context, string) error,
	put func(bucket string) workload.PutFunc) error {
	for _, prefix := range e.order {
		p := e.parts[prefix]
		marker := filepath.Join(dataDir, ".uploaded-"+p.bucket)
		if _, err := os.Stat(marker); err == nil {
			e.log("upload %s: already in %s (bucket %s)", prefix, server, p.bucket)
			continue
		}
		if err := mkBucket(ctx, p.bucket); err != nil {
			return err
		}
		entries := e.Manifest.Under(prefix)
		t0 := time.Now()
		err := workload.Upload(ctx, put(p.bucket), p.dir, entries, 32, func(pr workload.Progress) {
			e.log("  uploading %s: %s", prefix, pr)
		})
		if err != nil {
			return err
		}
		el := time.Since(t0)
		e.log("upload %s: %d objects, %s in %s (%.0f MB/s, %.0f objects/s) to %s bucket %s", prefix, len(entries),
			workload.FormatSize(workload.TotalSize(entries)), el.Round(time.Millisecond),
			float64(workload.TotalSize(entries))/1e6/el.Seconds(), float64(len(entries))/el.Seconds(), server, p.bucket)
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

// scratchParts gives each writing workload an empty directory and an
// empty bucket of its own to write into.
func (e *Env) scratchParts(ctx context.Context, wls []Workload) error {
	client := workload.NewS3Client(e.s3(e.MinIO.Endpoint))
	for _, w := range wls {
		prefix := w.Prefix(e.Cfg.Scale)
		if _, ok := w.(Writer); !ok || e.parts[prefix].dir != "" {
			continue
		}
		p := part{prefix: prefix, dir: filepath.Join(e.Cfg.WorkDir, "scratch"), bucket: "strata-bench-scratch-" + prefix}
		if err := os.MkdirAll(filepath.Join(p.dir, prefix), 0o755); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := workload.EnsureBucket(ctx, client, p.bucket); err != nil {
			return err
		}
		e.parts[prefix] = p
		if err := e.EmptyScratch(ctx, prefix); err != nil {
			return err
		}
	}
	return nil
}

// EmptyScratch removes what was written into a writing workload's part:
// the objects of its bucket and the files of its local directory. It runs
// before the workload and after each system's run of it (untimed), so the
// disk holds one system's checkpoints at a time (a full run writes tens of
// GiB; Strata's cache keeps 10% of the disk free and refuses writes past
// that).
func (e *Env) EmptyScratch(ctx context.Context, prefix string) error {
	p, ok := e.parts[prefix]
	if !ok || p.bucket != "strata-bench-scratch-"+prefix {
		return nil
	}
	if err := workload.EmptyBucket(ctx, workload.NewS3Client(e.s3(e.MinIO.Endpoint)), p.bucket); err != nil {
		return err
	}
	if err := e.MinIO.PurgeTrash(); err != nil {
		return err
	}
	dir := filepath.Join(p.dir, prefix)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, ent := range ents {
		if err := os.RemoveAll(filepath.Join(dir, ent.Name())); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

// startProxies starts toxiproxy with one proxy per latency. Without
// toxiproxy, a 0 ms latency goes straight to MinIO and others fail.
func (e *Env) startProxies(ctx context.Context) error {
	var err error
	e.Toxi, err = workload.StartToxiproxy(ctx, e.Cfg.WorkDir)
	if err != nil {
		if !errors.Is(err, workload.ErrNoTool) {
			return err
		}
		for _, d := range e.Cfg.Latencies {
			if d > 0 {
				return fmt.Errorf("bench: %w (run `make bench-tools`) for %s of latency", err, d)
			}
		}
		e.log("toxiproxy missing: 0ms goes straight to MinIO")
		e.Notes = append(e.Notes, "toxiproxy missing: 0 ms rows talk to MinIO directly")
		e.Lats = []Latency{{Delay: 0, Endpoint: "http://" + e.originAddr()}}
		return nil
	}
	for _, d := range e.Cfg.Latencies {
		name := fmt.Sprintf("minio_%dms", d.Milliseconds())
		addr, err := e.Toxi.Proxy(ctx, name, e.originAddr(), d)
		if err != nil {
			return err
		}
		l := Latency{Delay: d, Endpoint: "http://" + addr}
		e.Lats = append(e.Lats, l)
		e.log("proxy %s: %s -> %s", l.Name(), l.Endpoint, e.originAddr())
	}
	return nil
}

// holdOffPageReporting is workload.HoldOffPageReporting (a test stands in
// for a machine where it fails).
var holdOffPageReporting = workload.HoldOffPageReporting

// HoldOffPageReporting holds the VM's free page reporting off until
// Close, under -page-reporting off (workload.HoldOffPageReporting). It
// runs once the servers are up, so that a failed setup leaves the machine
// as it was. Where it cannot (not root), the run goes on with a warning,
// as it does when the page cache cannot be dropped.
func (e *Env) HoldOffPageReporting() {
	if e.Cfg.PageReporting != "off" {
		return
	}
	restore, note, err := holdOffPageReporting()
	if err != nil {
		note = fmt.Sprintf("free page reporting NOT held off (%v): write figures may swing from run to run", err)
		e.log("WARNING: %s", note)
		e.Notes = append(e.Notes, note)
		return
	}
	if restore != nil {
		e.restorePageReporting = restore
		e.Notes = append(e.Notes, note)
		e.log("%s", note)
	}
}

// Drop drops the page cache before a phase (failures were reported once
// at setup).
func (e *Env) Drop() {
	if e.DropErr == nil {
		_ = workload.DropPageCache()
	}
}

// originAddr is the host:port of the server holding the data.
func (e *Env) originAddr() string {
	if e.GCS != nil {
		return e.GCS.Addr
	}
	return e.MinIO.Addr
}

// Close stops the servers.
func (e *Env) Close() {
	if e.GCS != nil {
		_ = e.GCS.Stop()
	}
	if e.Toxi != nil {
		_ = e.Toxi.Stop()
	}
	if e.MinIO != nil {
		_ = e.MinIO.Stop()
	}
	if e.restorePageReporting != nil {
		if err := e.restorePageReporting(); err != nil {
			e.log("WARNING: free page reporting not restored: %v", err)
		}
		e.restorePageReporting = nil
	}
}
