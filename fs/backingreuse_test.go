package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// countingBacking hands out ids and counts the calls that reach it.
type countingBacking struct {
	mu          sync.Mutex
	next        int32
	live        map[int32]bool
	regs, unreg int
}

func (c *countingBacking) Register(int) (int32, syscall.Errno) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.regs++
	c.live[c.next] = true
	return c.next, 0
}

func (c *countingBacking) Unregister(id int32) syscall.Errno {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unreg++
	if !c.live[id] {
		return syscall.EINVAL
	}
	delete(c.live, id)
	return 0
}

func openFile(t *testing.T, path string, size int) *os.File {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestBackingReusedAcrossOpens: a small cache file opened, released and
// opened again (the next epoch) gets the id it had, with no second
// registration; a large one is released at once; an idle registration
// expires after idleBackingAge; Close releases what is left.
func TestBackingReusedAcrossOpens(t *testing.T) {
	inner := &countingBacking{live: map[int32]bool{}}
	r := newReusedBacking(inner)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	dir := t.TempDir()
	small := openFile(t, filepath.Join(dir, "small"), 128<<10)

	id1, errno := r.Register(int(small.Fd()))
	if errno != 0 {
		t.Fatal(errno)
	}
	// A second open of the same file (another descriptor) while the first
	// is open shares the registration.
	again, err := os.Open(small.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if id, _ := r.Register(int(again.Fd())); id != id1 {
		t.Fatalf("second open got id %d, want %d", id, id1)
	}
	unregister(t, r, id1)
	unregister(t, r, id1)
	if inner.unreg != 0 {
		t.Fatalf("released at the last close: %d unregisters, want the registration kept", inner.unreg)
	}
	if id, _ := r.Register(int(small.Fd())); id != id1 || inner.regs != 1 {
		t.Fatalf("next epoch: id %d (want %d), %d registrations (want 1)", id, id1, inner.regs)
	}
	unregister(t, r, id1)

	big := openFile(t, filepath.Join(dir, "big"), idleBackingSize+1)
	idBig, _ := r.Register(int(big.Fd()))
	unregister(t, r, idBig)
	if inner.live[idBig] {
		t.Fatal("a large file's registration was kept after its last close")
	}

	now = now.Add(idleBackingAge + time.Second)
	other := openFile(t, filepath.Join(dir, "other"), 10)
	idOther, _ := r.Register(int(other.Fd())) // any call expires what aged
	if inner.live[id1] {
		t.Fatalf("an idle registration outlived %v", idleBackingAge)
	}
	unregister(t, r, idOther)
	r.Close()
	if len(inner.live) != 0 {
		t.Fatalf("registrations left after Close: %v", inner.live)
	}
}

// TestBackingKeepsTheInodeItRegistered: while a registration is kept, its
// file's inode number cannot be handed to a new file, so a cache file
// deleted and written again is registered anew, never served by the old
// registration.
func TestBackingKeepsTheInodeItRegistered(t *testing.T) {
	inner := &countingBacking{live: map[int32]bool{}}
	r := newReusedBacking(inner)
	dir := t.TempDir()
	for i := range 200 {
		p := filepath.Join(dir, "object")
		f := openFile(t, p, 4096)
		id, _ := r.Register(int(f.Fd()))
		unregister(t, r, id)
		f.Close()
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if inner.regs != i+1 {
			t.Fatalf("file %d: %d registrations, want %d (a new file must never reuse an old registration)", i, inner.regs, i+1)
		}
	}
	r.Close()
}

func unregister(t *testing.T, r *reusedBacking, id int32) {
	t.Helper()
	if errno := r.Unregister(id); errno != 0 {
		t.Fatalf("unregister %d: %v", id, errno)
	}
}

// TestBackingReusedAcrossAnEpochOfManyFiles: a dataset of more small files
// than 1,024 (the bench's ImageFolder has 4,000 of 128 KiB) read epoch
// after epoch keeps every registration: the second epoch registers
// nothing. With the oldest registration dropped to make room at 1,024
// files or 256 MiB, a cyclic epoch over more than that re-registered
// every file (and a warm epoch ran at half the rate: fewer backing
// ioctls, and each cache file's inode stays in memory with the
// descriptor that holds it).
func TestBackingReusedAcrossAnEpochOfManyFiles(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 16000 {
		t.Fatalf("this test needs 16,000 descriptors: limit %d (%v)", lim.Cur, err)
	}
	inner := &countingBacking{live: map[int32]bool{}}
	r := newReusedBacking(inner)
	dir := t.TempDir()
	const files = 3000
	paths := make([]string, files)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprint("f", i))
		if err := os.WriteFile(paths[i], nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(paths[i], 128<<10); err != nil { // sparse: no disk
			t.Fatal(err)
		}
	}
	epoch := func() {
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			id, errno := r.Register(int(f.Fd()))
			if errno != 0 {
				t.Fatal(errno)
			}
			unregister(t, r, id)
			f.Close()
		}
	}
	epoch()
	epoch()
	if inner.regs != files {
		t.Fatalf("two epochs over %d files of 128 KiB: %d registrations, want %d (the second epoch reuses every one)", files, inner.regs, files)
	}
	r.Close()
	if len(inner.live) != 0 {
		t.Fatalf("registrations left after Close: %d", len(inner.live))
	}
}

func TestIdleFilesFor(t *testing.T) {
	for _, c := range []struct{ nofile, want uint64 }{
		{256, 64}, {1024, 256}, {20000, 5000}, {1 << 20, 65536},
	} {
		if got := idleFilesFor(c.nofile); uint64(got) != c.want {
			t.Errorf("idleFilesFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

// TestBackingLetsGoOfEvictedFiles: an idle registration whose cache file
// was unlinked (evicted) is released at the next release after a sweep is
// due, so it holds the file's blocks for seconds, not until it ages out;
// one whose file is still there is kept.
func TestBackingLetsGoOfEvictedFiles(t *testing.T) {
	inner := &countingBacking{live: map[int32]bool{}}
	r := newReusedBacking(inner)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	dir := t.TempDir()
	evicted := openFile(t, filepath.Join(dir, "evicted"), 4096)
	kept := openFile(t, filepath.Join(dir, "kept"), 4096)
	idEvicted, _ := r.Register(int(evicted.Fd()))
	idKept, _ := r.Register(int(kept.Fd()))
	unregister(t, r, idEvicted) // the first release sweeps (nothing to find yet)
	unregister(t, r, idKept)
	evicted.Close()
	if err := os.Remove(evicted.Name()); err != nil {
		t.Fatal(err)
	}
	other := openFile(t, filepath.Join(dir, "other"), 10)
	idOther, _ := r.Register(int(other.Fd()))
	unregister(t, r, idOther) // no sweep due yet
	if !inner.live[idEvicted] {
		t.Fatal("released before a sweep was due")
	}
	now = now.Add(idleSweepEvery)
	idOther, _ = r.Register(int(other.Fd()))
	unregister(t, r, idOther) // the sweep
	if inner.live[idEvicted] {
		t.Fatal("an evicted file's registration was kept after the sweep")
	}
	if !inner.live[idKept] {
		t.Fatal("a file still in the cache lost its registration")
	}
	if id, _ := r.Register(int(kept.Fd())); id != idKept {
		t.Fatalf("kept file got id %d, want %d", id, idKept)
	}
	unregister(t, r, idKept)
	r.Close()
}
