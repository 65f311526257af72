package workload

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTarShards generates WebDataset shards and streams them twice with
// python/tarshards.py in one process: every sample and every member byte
// the generator wrote (as ShardContents predicts) is read, each epoch.
func TestTarShards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python with PyTorch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := &WebDatasetSpec{Prefix: "wds", Shards: 3, ShardSize: 1 << 20, SampleSize: 10_000}
	dir := t.TempDir()
	m, err := Generate(ctx, dir, Dataset{Seed: 3, WebDataset: spec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Under("wds")) != 3 {
		t.Fatalf("%d shards", len(m.Files))
	}
	perShard, perShardBytes := spec.ShardContents()
	if perShard < 50 || perShardBytes <= int64(perShard)*spec.SampleSize {
		t.Fatalf("ShardContents: %d samples, %d bytes", perShard, perShardBytes)
	}
	ts, err := StartTarShards(ctx, TarShardsOpts{Root: filepath.Join(dir, "wds"), Streams: 2, BatchSize: 16})
	needTorch(t, err)
	defer ts.Close()
	for i := 0; i < 2; i++ {
		r, err := ts.Epoch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Shards != 3 || r.Streams != 2 || r.Samples != 3*perShard || r.Members != 2*r.Samples ||
			r.Bytes != 3*perShardBytes || r.Truncated || r.Seconds <= 0 || r.Torch == "" {
			t.Errorf("epoch %d: %+v, want %d samples and %d bytes", i, r, 3*perShard, 3*perShardBytes)
		}
		s := r.Summary()
		if s.Ops != int64(r.Samples) || s.Bytes != r.Bytes || s.P99 < s.P50 || !strings.Contains(s.Note, "3 shards") {
			t.Errorf("summary %+v", s)
		}
	}
	if err := ts.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// TestTarShardsFailure: an epoch over a directory without shards fails
// with Python's reason.
func TestTarShardsFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python with PyTorch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts, err := StartTarShards(ctx, TarShardsOpts{Root: t.TempDir()})
	needTorch(t, err)
	defer ts.Close()
	if _, err := ts.Epoch(ctx); err == nil || !strings.Contains(err.Error(), "no .tar shards") {
		t.Fatalf("epoch without shards: %v", err)
	}
}
