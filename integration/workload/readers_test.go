package workload

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// The readers run in child processes (this test binary re-executed).
func TestReadersInProcesses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, err := Generate(ctx, dir, tinyDataset(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	img := m.Under("img")
	readAllImages(t, dir, img, false)

	big := m.Under("big")[0]
	p, err := RandomReads(ctx, PreadOpts{Path: filepath.Join(dir, big.Path), Procs: 2, Count: 50, Size: 4096, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Ops != 100 || p.Bytes != 100*4096 {
		t.Errorf("pread summary %+v", p)
	}

	w, err := Walk(ctx, filepath.Join(dir, "list"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// 50 keys + 2 dirs + 6 subdirs
	if w.Ops != 58 {
		t.Errorf("walk saw %d entries, want 58", w.Ops)
	}
}

func TestReadersReportErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, err := Generate(ctx, dir, Dataset{Seed: 1, ImageFolder: &ImageFolderSpec{Prefix: "img", Files: 4, Dirs: 1, Size: 100}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	entries := m.Under("img")
	// A wrong checksum is a failure, not a measurement.
	entries[2].SHA256 = strings.Repeat("0", 64)
	_, err = ReadFiles(ctx, ReadOpts{Root: dir, Entries: entries, Procs: 2, Verify: true})
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("bad checksum: err = %v", err)
	}
	// So does a file of the wrong size.
	entries[2].SHA256 = ""
	entries[1].Size++
	_, err = ReadFiles(ctx, ReadOpts{Root: dir, Entries: entries, Procs: 2})
	if err == nil || !strings.Contains(err.Error(), "want 101") {
		t.Errorf("wrong size: err = %v", err)
	}
	entries[1].Size--
	if err := os.Remove(filepath.Join(dir, entries[0].Path)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFiles(ctx, ReadOpts{Root: dir, Entries: entries, Procs: 2}); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := RandomReads(ctx, PreadOpts{Path: filepath.Join(dir, "nope"), Procs: 1, Count: 1, Size: 1}); err == nil {
		t.Error("missing pread file: no error")
	}
	// A cancelled context stops the workers.
	cctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-cctx.Done()
	if _, err := Walk(cctx, dir, 0); err == nil {
		t.Error("cancelled walk: no error")
	}
}

func TestReadTimeCap(t *testing.T) {
	dir := t.TempDir()
	m, err := Generate(context.Background(), dir, tinyDataset(5), nil)
	if err != nil {
		t.Fatal(err)
	}
	big := m.Under("big")[0]
	s, err := RandomReads(context.Background(), PreadOpts{Path: filepath.Join(dir, big.Path), Procs: 1,
		Count: 1 << 30, Size: 512, Seed: 2, MaxDuration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The cap, not the count, must end the run. Zero ops is a legal
	// outcome: on a loaded machine the first 512-byte read (and the open
	// before it) can outlast 200 ms.
	if !s.Truncated || s.Ops >= 1<<30 {
		t.Errorf("capped run: %+v", s)
	}
}

// TestPythonReaders: python/readfiles.py speaks the Go workers' protocol:
// the same summary for the same files, the same failures for a wrong
// checksum, a wrong size or a missing file.
func TestPythonReaders(t *testing.T) {
	if _, err := os.Stat(Python()); err != nil {
		testserver.SkipOrFail(t, "no %s: %v (make bench-tools installs it)", Python(), err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	m, err := Generate(ctx, dir, tinyDataset(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	img := m.Under("img")
	readAllImages(t, dir, img, true)

	entries := append([]FileEntry(nil), img...)
	entries[2].SHA256 = strings.Repeat("0", 64)
	_, err = ReadFiles(ctx, ReadOpts{Root: filepath.Join(dir, "img"), StripPrefix: "img", Entries: entries, Procs: 2, Verify: true, Python: true})
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("bad checksum: err = %v", err)
	}
	entries[2].SHA256 = ""
	entries[1].Size++
	_, err = ReadFiles(ctx, ReadOpts{Root: filepath.Join(dir, "img"), StripPrefix: "img", Entries: entries, Procs: 2, Python: true})
	if want := "want " + strconv.FormatInt(entries[1].Size, 10); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("wrong size: err = %v, want it to say %q", err, want)
	}
	entries[1].Size--
	entries[0].Path += ".missing"
	if _, err := ReadFiles(ctx, ReadOpts{Root: filepath.Join(dir, "img"), StripPrefix: "img", Entries: entries, Procs: 2, Python: true}); err == nil {
		t.Error("missing file: no error")
	}
}

// readAllImages reads the tiny dataset's images in 3 processes (Go or
// Python) and checks the summary: every file, every byte, verified.
func readAllImages(t *testing.T, dir string, img []FileEntry, python bool) {
	t.Helper()
	s, err := ReadFiles(context.Background(), ReadOpts{Root: filepath.Join(dir, "img"), StripPrefix: "img", Entries: img,
		Procs: 3, Shuffle: 9, Verify: true, Python: python})
	if err != nil {
		t.Fatal(err)
	}
	if s.Ops != int64(len(img)) || s.Bytes != TotalSize(img) || s.Verified != s.Ops || s.Procs != 3 {
		t.Errorf("summary %+v for %d files of %d bytes", s, len(img), TotalSize(img))
	}
	if s.P50 <= 0 || s.P99 < s.P50 || s.Elapsed <= 0 {
		t.Errorf("latencies: %+v", s)
	}
}
