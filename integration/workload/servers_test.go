package workload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// needTool skips (or, under STRATA_E2E=1, fails) when a binary is missing.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := Tool(name); err != nil {
		testserver.SkipOrFail(t, "%v; run `make tools bench-tools` to run this test", err)
	}
}

// TestServersEndToEnd uploads a tiny dataset to a real MinIO, reads it back
// through toxiproxy with the GET client and through every available FUSE
// client, and checks bytes and injected latency.
func TestServersEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MinIO and toxiproxy")
	}
	needTool(t, "minio")
	needTool(t, "toxiproxy-server")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	m, err := Generate(ctx, filepath.Join(dir, "src"), tinyDataset(11), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := StartMinIO(ctx, filepath.Join(dir, "minio"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	tp, err := StartToxiproxy(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tp.Stop() }()
	cfg := S3Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}
	client := NewS3Client(cfg)
	if err := EnsureBucket(ctx, client, "bench"); err != nil {
		t.Fatal(err)
	}
	if err := EnsureBucket(ctx, client, "bench"); err != nil {
		t.Fatalf("second EnsureBucket: %v", err)
	}
	if err := Upload(ctx, S3Put(client, "bench"), filepath.Join(dir, "src"), m.Files, 8, nil); err != nil {
		t.Fatal(err)
	}
	slow, err := tp.Proxy(ctx, "slow", srv.Addr, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Endpoint = "http://" + slow
	g := &GetClient{S3: NewS3Client(cfg), Bucket: "bench"}
	img := m.Under("img")
	s, err := g.GetObjects(ctx, img, 4)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ops != int64(len(img)) || s.Bytes != TotalSize(img) {
		t.Errorf("GET client: %+v", s)
	}
	if s.P50 < 50*time.Millisecond {
		t.Errorf("p50 %v through a 50 ms proxy", s.P50)
	}
	l, err := g.List(ctx, "list/")
	if err != nil || l.Ops != 50 {
		t.Errorf("list: %d keys, %v", l.Ops, err)
	}
	r, err := g.RandomRanges(ctx, "big/big-00.bin", 100_000, 4096, 3, 2, 1, 0)
	if err != nil || r.Ops != 6 {
		t.Errorf("ranges: %+v %v", r, err)
	}

	for _, mt := range []Mounter{&Rclone{}, &S3fs{}, &Strata{}, &Strata{Background: true}} {
		t.Run(mt.Name(), func(t *testing.T) {
			if err := mt.Available(ctx); err != nil {
				testserver.SkipOrFail(t, "%s not installed (`make bench-peers` installs rclone and s3fs): %v", mt.Name(), err)
			}
			if _, err := os.Stat("/dev/fuse"); err != nil {
				testserver.SkipOrFail(t, "no /dev/fuse: %v", err)
			}
			base := filepath.Join(dir, mt.Name()+time.Now().Format("150405.000000"))
			spec := MountSpec{Bucket: "bench", Prefix: "img", Endpoint: srv.Endpoint, Region: srv.Region,
				AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, CacheDir: filepath.Join(base, "cache"),
				Mountpoint: filepath.Join(base, "mnt"), LogPath: filepath.Join(base, "log")}
			mnt, err := mt.Mount(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = mnt.Unmount(context.Background()) }()
			s, err := ReadFiles(ctx, ReadOpts{Root: mnt.Root, StripPrefix: "img", Entries: img, Procs: 2, Shuffle: 1, Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			if s.Verified != int64(len(img)) {
				t.Errorf("verified %d of %d", s.Verified, len(img))
			}
			if err := mnt.Unmount(ctx); err != nil {
				t.Fatal(err)
			}
			if IsMounted(spec.Mountpoint) {
				t.Error("still mounted")
			}
		})
	}
}

func TestDropPageCache(t *testing.T) {
	err := DropPageCache()
	if err != nil && !errors.Is(err, ErrNoDrop) {
		t.Fatalf("unexpected error type: %v", err)
	}
	t.Logf("drop: %v", err)
}

func TestDescribeMachine(t *testing.T) {
	m := DescribeMachine(t.TempDir())
	if m.Cores < 1 || m.Kernel == "" {
		t.Errorf("machine: %+v", m)
	}
	t.Log(m)
}

// PurgeTrash empties MinIO's trash (deleted objects not yet freed) and
// nothing else; a drive with no trash yet is not an error.
func TestPurgeTrash(t *testing.T) {
	dir := t.TempDir()
	m := &MinIO{DataDir: dir}
	if err := m.PurgeTrash(); err != nil {
		t.Fatalf("no trash yet: %v", err)
	}
	trash := filepath.Join(dir, ".minio.sys", "tmp", ".trash")
	kept := filepath.Join(dir, "bucket", "key", "xl.meta")
	for _, f := range []string{filepath.Join(trash, "a", "part.1"), filepath.Join(trash, "b"), kept} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.PurgeTrash(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(trash); err != nil || len(ents) != 0 {
		t.Errorf("trash after purge: %d entries, %v", len(ents), err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("an object outside the trash was touched: %v", err)
	}
}
