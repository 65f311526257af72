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
	Cfg      Config
	DataDir  string
	Manifest *workload.Manifest
	MinIO    *workload.MinIO
	Toxi     *workload.Toxiproxy
	Lats     []Latency
	Machine  workload.Machine
	// DropErr is set when the page cache cannot be dropped.
	DropErr error
	// Notes are facts about the run for the report.
	Notes []string
	log   func(format string, args ...any)
}

// setup generates and uploads the data of the selected workloads and
// starts MinIO and toxiproxy. Close undoes what it started.
func setup(ctx context.Context, cfg Config, wls []Workload, logf func(string, ...any)) (*Env, error) {
	e := &Env{Cfg: cfg, DataDir: filepath.Join(cfg.WorkDir, "data"), log: logf}
	if err := os.MkdirAll(e.DataDir, 0o755); err != nil {
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
	t0 := time.Now()
	m, err := workload.Generate(ctx, e.DataDir, ds, func(done, total int64) {
		logf("  generating: %s of %s", workload.FormatSize(done), workload.FormatSize(total))
	})
	if err != nil {
		return nil, err
	}
	e.Manifest = m
	logf("dataset: %d files, %s in %s (%s)", len(m.Files), workload.FormatSize(workload.TotalSize(m.Files)),
		e.DataDir, time.Since(t0).Round(time.Millisecond))

	minioDir := filepath.Join(cfg.WorkDir, "minio")
	if e.MinIO, err = workload.StartMinIO(ctx, minioDir); err != nil {
		return nil, err
	}
	logf("minio: %s (drive %s)", e.MinIO.Endpoint, e.MinIO.DataDir)
	if err := e.upload(ctx, ds, minioDir); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.startProxies(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// s3 returns the client settings for an endpoint of this MinIO.
func (e *Env) s3(endpoint string) workload.S3Config {
	return workload.S3Config{Endpoint: endpoint, Region: e.MinIO.Region, AccessKey: e.MinIO.AccessKey, SecretKey: e.MinIO.SecretKey}
}

// upload puts the parts not uploaded before (a marker file per part and
// definition sits beside the MinIO drive).
func (e *Env) upload(ctx context.Context, ds workload.Dataset, minioDir string) error {
	client := workload.NewS3Client(e.s3(e.MinIO.Endpoint))
	if err := workload.EnsureBucket(ctx, client, e.Cfg.Bucket); err != nil {
		return err
	}
	for _, part := range ds.Parts() {
		prefix := part.Prefixes()[0]
		marker := filepath.Join(minioDir, ".uploaded-"+e.Cfg.Bucket+"-"+prefix+"-"+part.Hash())
		if _, err := os.Stat(marker); err == nil {
			e.log("upload %s: already in MinIO", prefix)
			continue
		}
		entries := e.Manifest.Under(prefix)
		t0 := time.Now()
		err := workload.Upload(ctx, workload.S3Put(client, e.Cfg.Bucket), e.DataDir, entries, 32, func(p workload.Progress) {
			e.log("  uploading %s: %s", prefix, p)
		})
		if err != nil {
			return err
		}
		el := time.Since(t0)
		e.log("upload %s: %d objects, %s in %s (%.0f MB/s, %.0f objects/s)", prefix, len(entries),
			workload.FormatSize(workload.TotalSize(entries)), el.Round(time.Millisecond),
			float64(workload.TotalSize(entries))/1e6/el.Seconds(), float64(len(entries))/el.Seconds())
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
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
		e.Lats = []Latency{{Delay: 0, Endpoint: e.MinIO.Endpoint}}
		return nil
	}
	for _, d := range e.Cfg.Latencies {
		name := fmt.Sprintf("minio_%dms", d.Milliseconds())
		addr, err := e.Toxi.Proxy(ctx, name, e.MinIO.Addr, d)
		if err != nil {
			return err
		}
		l := Latency{Delay: d, Endpoint: "http://" + addr}
		e.Lats = append(e.Lats, l)
		e.log("proxy %s: %s -> %s", l.Name(), l.Endpoint, e.MinIO.Addr)
	}
	return nil
}

// Drop drops the page cache before a phase (failures were reported once
// at setup).
func (e *Env) Drop() {
	if e.DropErr == nil {
		_ = workload.DropPageCache()
	}
}

// Close stops the servers.
func (e *Env) Close() {
	if e.Toxi != nil {
		_ = e.Toxi.Stop()
	}
	if e.MinIO != nil {
		_ = e.MinIO.Stop()
	}
}
