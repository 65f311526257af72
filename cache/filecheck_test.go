package cache

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// The README promises that a restart is a warm start: after a clean
// shutdown the blocks the index records are trusted without being
// re-read. They are trusted only while the cache file can hold them: a
// cache file removed, or cut short, while the mount was stopped (or
// behind its back) must never be served as the object's bytes. Its
// missing blocks are forgotten (index, memory, used bytes), logged once,
// and fetched again.

// logBuf collects a store's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count is how many lines hold s.
func (l *logBuf) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func loggedOpts(l *logBuf) Options {
	o := testOpts()
	o.Logger = slog.New(slog.NewTextHandler(l, nil))
	return o
}

// cachedThenStopped fills an object of 4 blocks less 100 bytes, shuts the
// store down cleanly and returns the key, its data and its cache file.
func cachedThenStopped(t *testing.T, dir string) (ObjectKey, []byte, string) {
	t.Helper()
	data := randBytes(4*bs - 100)
	key := ObjectKey{Source: "s3://b", Key: "rd/big", Version: "v1", Size: int64(len(data))}
	s := openStore(t, dir, testOpts())
	o, err := s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	fill(o, t, data)
	p := s.pathOf(o.ID())
	o.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return key, data, p
}

// readPresent reads the object through the cache as the read path does: the
// present blocks from the file, and nothing else.
func readPresent(t *testing.T, o *Object, data []byte) {
	t.Helper()
	p := make([]byte, bs)
	for i := range o.NumBlocks() {
		if !o.Has(i) {
			continue
		}
		n, err := o.ReadAt(p[:o.BlockLen(i)], i*bs)
		if errors.Is(err, ErrCorrupt) {
			continue // dropped: the caller fetches it again
		}
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("block %d: %v", i, err)
		}
		if !bytes.Equal(p[:n], data[i*bs:i*bs+int64(n)]) {
			t.Fatalf("block %d served %d bytes that are not the object's", i, n)
		}
	}
}

// TestMissingCacheFileAfterCleanShutdown: the file removed while the mount
// was stopped; none of its blocks is present at the next (trusted) start.
func TestMissingCacheFileAfterCleanShutdown(t *testing.T) {
	dir := t.TempDir()
	key, data, p := cachedThenStopped(t, dir)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	var log logBuf
	s := openStore(t, dir, loggedOpts(&log))
	if !s.Trusted() {
		t.Fatal("a clean shutdown was not trusted")
	}
	o, err := s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	readPresent(t, o, data)
	if o.PresentBlocks() != 0 || o.Complete() || s.Used() != 0 {
		t.Fatalf("missing cache file: %d blocks present, complete=%v, used %d; want none", o.PresentBlocks(), o.Complete(), s.Used())
	}
	if n := log.count("cache file"); n != 1 {
		t.Errorf("logged %d lines about the cache file; want 1:\n%s", n, log.b.String())
	}
	// `strata cache verify` reports them, once.
	if bad, err := o.Reverify(); bad != 4 || err != nil {
		t.Errorf("Reverify after the file went: %d bad, %v; want the 4 lost blocks", bad, err)
	}
	if bad, err := o.Reverify(); bad != 0 || err != nil {
		t.Errorf("second Reverify: %d bad, %v; want 0", bad, err)
	}
	fill(o, t, data) // fetched again
	readPresent(t, o, data)
	o.Release()
	s.Close()

	// The index forgot them too, and learnt the refetched ones.
	s = openStore(t, dir, testOpts())
	defer s.Close()
	o, _ = s.Acquire(key)
	defer o.Release()
	if !o.Complete() || s.Used() != int64(len(data)) {
		t.Fatalf("after the refetch and a clean restart: complete=%v used %d", o.Complete(), s.Used())
	}
	readPresent(t, o, data)
}

// TestShortCacheFileAfterCleanShutdown: the file cut short in block 1
// while the mount was stopped: block 0 stays, blocks 1-3 are gone.
func TestShortCacheFileAfterCleanShutdown(t *testing.T) {
	dir := t.TempDir()
	key, data, p := cachedThenStopped(t, dir)
	if err := os.Truncate(p, bs+100); err != nil {
		t.Fatal(err)
	}
	var log logBuf
	s := openStore(t, dir, loggedOpts(&log))
	o, err := s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	readPresent(t, o, data)
	if !o.Has(0) || o.PresentBlocks() != 1 || s.Used() != bs {
		t.Fatalf("cut in block 1: block 0 present=%v, %d blocks present, used %d; want block 0 alone", o.Has(0), o.PresentBlocks(), s.Used())
	}
	if n := log.count("cache file"); n != 1 {
		t.Errorf("logged %d lines about the cache file; want 1:\n%s", n, log.b.String())
	}
	o.Release()
	s.Close()
	s = openStore(t, dir, testOpts())
	defer s.Close()
	o, _ = s.Acquire(key)
	defer o.Release()
	if o.PresentBlocks() != 1 || s.Used() != bs {
		t.Fatalf("the index still records the lost blocks: %d present, used %d", o.PresentBlocks(), s.Used())
	}
}

// TestCacheFileRemovedBeforeFirstOpen: the state is loaded (the file was
// there) and the file goes before this run first opens it: the read of a
// block it recorded must not be served from the file the open creates.
func TestCacheFileRemovedBeforeFirstOpen(t *testing.T) {
	dir := t.TempDir()
	key, data, p := cachedThenStopped(t, dir)
	s := openStore(t, dir, testOpts())
	defer s.Close()
	o, err := s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	if !o.Complete() {
		t.Fatal("the object is not complete after a clean restart")
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, bs)
	if n, err := o.ReadAt(buf, bs); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a block whose file is gone: %d bytes, err %v; want ErrCorrupt", n, err)
	}
	if o.PresentBlocks() != 0 || s.Used() != 0 {
		t.Fatalf("after the file went: %d blocks present, used %d; want none", o.PresentBlocks(), s.Used())
	}
	readPresent(t, o, data)
}

// TestCacheFileCutWhileOpen: the file this run has open is cut short.
// CheckFile (what a passthrough open and warm call) finds it with an
// fstat; a read of a block past the cut finds it too, and drops every
// block past it, not only those it read.
func TestCacheFileCutWhileOpen(t *testing.T) {
	for _, c := range []struct {
		name    string
		cut     int64
		present int64 // blocks left
		find    func(t *testing.T, o *Object)
	}{
		{"CheckFile", 1000, 0, func(t *testing.T, o *Object) {
			if err := o.CheckFile(); err != nil {
				t.Fatal(err)
			}
		}},
		{"read", bs + 100, 1, func(t *testing.T, o *Object) {
			if _, err := o.ReadAt(make([]byte, 10), 2*bs); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read past the cut: %v; want ErrCorrupt", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			key, data, p := cachedThenStopped(t, dir)
			var log logBuf
			s := openStore(t, dir, loggedOpts(&log))
			defer s.Close()
			o, err := s.Acquire(key)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Release()
			if _, err := o.Fd(); err != nil || !o.Complete() {
				t.Fatalf("open: %v, complete=%v", err, o.Complete())
			}
			if err := o.CheckFile(); err != nil || !o.Complete() || log.count("cache file") != 0 {
				t.Fatalf("CheckFile of an intact file: %v, complete=%v, log:\n%s", err, o.Complete(), log.b.String())
			}
			if err := os.Truncate(p, c.cut); err != nil {
				t.Fatal(err)
			}
			c.find(t, o)
			if o.PresentBlocks() != c.present || s.Used() != c.present*bs {
				t.Fatalf("cut at %d: %d blocks present, used %d; want %d", c.cut, o.PresentBlocks(), s.Used(), c.present)
			}
			if err := o.CheckFile(); err != nil {
				t.Fatal(err)
			}
			if n := log.count("cache file"); n != 1 {
				t.Errorf("logged %d lines about the cache file; want 1:\n%s", n, log.b.String())
			}
			readPresent(t, o, data)
			fill(o, t, data) // fetched again: the file grows back
			readPresent(t, o, data)
			if err := o.CheckFile(); err != nil || !o.Complete() {
				t.Fatalf("after the refetch: %v, complete=%v", err, o.Complete())
			}
		})
	}
}
