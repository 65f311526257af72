package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/internal/testserver"
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

// TestBackingKeepsAnEpochOfSmallFiles: an epoch over more small files than
// the first limit (1,024) kept opens them all again without a
// registration: in the sidecar mode each one is two round trips to the
// CSI plugin.
func TestBackingKeepsAnEpochOfSmallFiles(t *testing.T) {
	inner := &countingBacking{live: map[int32]bool{}}
	r := newReusedBacking(inner)
	defer r.Close()
	const n = 2000
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 4*n {
		testserver.SkipOrFail(t, "descriptor limit %d (%v) allows fewer than %d kept registrations", lim.Cur, err, n)
	}
	dir := t.TempDir()
	files := make([]*os.File, n)
	for i := range files {
		files[i] = openFile(t, filepath.Join(dir, fmt.Sprint(i)), 4096)
	}
	for epoch := range 2 {
		for _, f := range files {
			id, errno := r.Register(int(f.Fd()))
			if errno != 0 {
				t.Fatal(errno)
			}
			unregister(t, r, id)
		}
		if inner.regs != n {
			t.Fatalf("epoch %d: %d registrations, want %d (one per file)", epoch+1, inner.regs, n)
		}
	}
}

// TestBackingReleasedOnceItsFileIsEvicted: an idle registration holds the
// file's blocks on disk; once the cache has removed the file, the next
// sweep releases it without any other call, while one of a file still
// cached stays.
func TestBackingReleasedOnceItsFileIsEvicted(t *testing.T) {
	inner := &countingBacking{live: map[int32]bool{}}
	r := newReusedBackingEvery(inner, 10*time.Millisecond)
	defer r.Close()
	dir := t.TempDir()
	evicted := openFile(t, filepath.Join(dir, "evicted"), 4096)
	kept := openFile(t, filepath.Join(dir, "kept"), 4096)
	idE, _ := r.Register(int(evicted.Fd()))
	idK, _ := r.Register(int(kept.Fd()))
	unregister(t, r, idE)
	unregister(t, r, idK)
	if err := os.Remove(evicted.Name()); err != nil {
		t.Fatal(err)
	}
	live := func(id int32) bool {
		inner.mu.Lock()
		defer inner.mu.Unlock()
		return inner.live[id]
	}
	for deadline := time.Now().Add(5 * time.Second); live(idE); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the registration of a removed cache file outlived 5 s of sweeps every 10 ms")
		}
	}
	time.Sleep(50 * time.Millisecond) // a few more sweeps
	if !live(idK) {
		t.Error("the registration of a cached file was released by a sweep")
	}
}

// TestKeepRegisteredBeforeTheFirstOpen: a restarted mount registers its
// recent small cache files ahead of their first open, and that open
// finds the registration instead of making one; a file that would not
// be kept after a release (over 8 MiB), or a mount without passthrough,
// registers nothing.
func TestKeepRegisteredBeforeTheFirstOpen(t *testing.T) {
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.Engine, so.MaxBytes, so.MinFree = eng, 1<<30, 0
	store, err := cache.Open(t.TempDir(), so)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	object := func(key string, size int) *cache.Object {
		o, err := store.Acquire(cache.ObjectKey{Source: "s3://b", Key: key, Version: "v", Size: int64(size)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(o.Release)
		data := make([]byte, size)
		for i := range o.NumBlocks() {
			if err := o.WriteBlock(i, data[i*o.BlockSize():i*o.BlockSize()+o.BlockLen(i)]); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	small, big := object("small", 128<<10), object("big", idleBackingSize+1)
	inner := &countingBacking{live: map[int32]bool{}}
	m := &Mounted{Passthrough: true, backing: newReusedBacking(inner)}
	defer m.Close()

	if !m.KeepRegistered(small) || inner.regs != 1 || inner.unreg != 0 {
		t.Fatalf("small file: %d registrations, %d releases; want it registered and kept", inner.regs, inner.unreg)
	}
	fd, err := small.Fd()
	if err != nil {
		t.Fatal(err)
	}
	again, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", fd)) // another descriptor, as an open has
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, errno := m.backing.Register(int(again.Fd())); errno != 0 || inner.regs != 1 {
		t.Fatalf("first open after it: %v, %d registrations (want the kept one)", errno, inner.regs)
	}
	if m.KeepRegistered(big) || inner.regs != 1 {
		t.Errorf("a file over %d bytes was kept registered", idleBackingSize)
	}
	off := &Mounted{Passthrough: false, backing: newReusedBacking(inner)}
	defer off.Close()
	if off.KeepRegistered(small) || inner.regs != 1 {
		t.Error("a mount without passthrough registered a file")
	}
}
