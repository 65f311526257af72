package cache

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratafs/strata/cache/index"
)

// TestCacheFilesLiveOneLevelDown: a cache file is objects/ab/<id>, one
// directory level under objects (256 directories): after a restart with
// the page cache dropped, opening a file costs one directory block, not
// two levels of 65,536 directories.
func TestCacheFilesLiveOneLevelDown(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(2*bs + 7)
	key := ObjectKey{Source: "s3://b", Key: "k", Version: "v1", Size: int64(len(data))}
	s := openStore(t, dir, testOpts())
	o, err := s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	fill(o, t, data)
	o.Release()
	s.Close()
	id := index.IDFor(key.Source, key.Key, key.Version).String()
	if _, err := os.Stat(filepath.Join(dir, "objects", id[:2], id)); err != nil {
		t.Fatalf("cache file not at objects/%s/<id>: %v", id[:2], err)
	}
}

// TestTwoLevelCacheIsMovedToOneLevel: a cache written by a release that
// kept files under objects/ab/cd/<id> (format 1) is moved to the
// one-level layout when it is opened, every cached byte kept (a clean
// shutdown's trust too), and its format record says so; a move cut
// short by a crash is finished by the next open.
func TestTwoLevelCacheIsMovedToOneLevel(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(3*bs + 11)
	keys := []ObjectKey{
		{Source: "s3://b", Key: "a", Version: "v1", Size: int64(len(data))},
		{Source: "s3://b", Key: "b", Version: "v1", Size: int64(len(data))},
		{Source: "s3://b", Key: "c", Version: "v1", Size: int64(len(data))},
	}
	s := openStore(t, dir, testOpts())
	for _, k := range keys {
		o, err := s.Acquire(k)
		if err != nil {
			t.Fatal(err)
		}
		fill(o, t, data)
		o.Release()
	}
	s.Close()
	// Make it the old layout: files two levels down, format 1; the third
	// file already moved, as a move cut short leaves it.
	for i, k := range keys[:2] {
		id := index.IDFor(k.Source, k.Key, k.Version).String()
		old := filepath.Join(dir, "objects", id[:2], id[2:4], id)
		if err := os.MkdirAll(filepath.Dir(old), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "objects", id[:2], id), old); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	setFormatVersion(t, dir, 1)

	s = openStore(t, dir, testOpts())
	defer s.Close()
	if !s.Trusted() {
		t.Error("the move lost the clean shutdown's trust")
	}
	for _, k := range keys {
		o, err := s.Acquire(k)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		n, err := o.ReadAt(got, 0)
		if !o.Complete() || n != len(data) || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(got, data) {
			t.Fatalf("%s after the move: complete %v, read %d, %v", k.Key, o.Complete(), n, err)
		}
		o.Release()
		id := index.IDFor(k.Source, k.Key, k.Version).String()
		if _, err := os.Stat(filepath.Join(dir, "objects", id[:2], id[2:4])); !os.IsNotExist(err) {
			t.Errorf("%s: the old second-level directory is left (%v)", k.Key, err)
		}
	}
	if f, ok, err := s.ix.ReadFormat(); err != nil || !ok || f.Version != index.FormatVersion {
		t.Errorf("format after the move: %+v %v %v, want version %d", f, ok, err, index.FormatVersion)
	}
}

func setFormatVersion(t *testing.T, dir string, v int) {
	t.Helper()
	ix, err := index.Open(filepath.Join(dir, "index"), index.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	f, ok, err := ix.ReadFormat()
	if err != nil || !ok {
		t.Fatalf("format: %v %v", ok, err)
	}
	f.Version = v
	if err := ix.WriteFormat(f); err != nil {
		t.Fatal(err)
	}
}
