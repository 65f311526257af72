package fs

import (
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache/writeback"
)

// TestAnOpenRightAfterTheLastReleaseGetsNoStaleBacking: a file read
// through passthrough while a writer rewrites it (open(O_TRUNC), write,
// close). The reader's release is the last: an open in the moment
// between its Release and go-fuse letting go of the backing registration
// asked for the new content by passthrough, and go-fuse handed the kernel
// the registration it still held, the old cache file: the read returned
// the old bytes (found by TestRandomCallsMatchLocalDisk; by hand, a
// reader, a save with O_TRUNC and cat, see
// docs/results/2026-11-30/stale-backing).
func TestAnOpenRightAfterTheLastReleaseGetsNoStaleBacking(t *testing.T) {
	f := newBackedTestFS(t)
	ino, reader := openCachedByPassthrough(t, f, "a")

	w := f.open(ino, syscall.O_WRONLY|syscall.O_TRUNC)
	if n, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: w}, []byte("new")); s != fuse.OK || n != 3 {
		t.Fatalf("write: %d, %v", n, s)
	}
	f.release(ino, w)
	f.fsys.mu.Lock()
	node := f.fsys.files["a"]
	f.fsys.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		node.mu.Lock()
		committed := node.peekWS().session() == nil
		node.mu.Unlock()
		if committed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rewrite was not committed")
		}
	}

	again := openAtTheLastRelease(t, f, "a", ino, reader, syscall.O_RDONLY)
	if again.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 && again.BackingID == reader.BackingID {
		t.Errorf("the open got the old content's backing registration %d", reader.BackingID)
	}
	if got, errno := f.read(ino, again.Fh, 0, 100); errno == 0 && again.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 && string(got) != "new" {
		t.Errorf("read %q, want the new content", got)
	}
	f.release(ino, again.Fh)
}

// TestASaveRightAfterTheLastReleaseGetsNoStaleBacking: the same moment,
// met by a save (open(O_TRUNC) of a file nobody else has open, written by
// passthrough into a new staging file). Handed the registration go-fuse
// still held, the kernel would have written the save into the cache file
// of the version it replaces.
func TestASaveRightAfterTheLastReleaseGetsNoStaleBacking(t *testing.T) {
	f := newBackedTestFS(t)
	ino, reader := openCachedByPassthrough(t, f, "a")
	again := openAtTheLastRelease(t, f, "a", ino, reader, syscall.O_WRONLY|syscall.O_TRUNC)
	if again.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 && again.BackingID == reader.BackingID {
		t.Errorf("the save got the read version's backing registration %d", reader.BackingID)
	}
	if n, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: again.Fh}, []byte("new")); s != fuse.OK || n != 3 {
		t.Fatalf("write: %d, %v", n, s)
	}
	f.release(ino, again.Fh)
}

// newBackedTestFS is a filesystem with one file, "a", passthrough on and
// uploads held back (written content stays staged).
func newBackedTestFS(t *testing.T) *testFS {
	wo := writeback.DefaultOptions()
	wo.Mode, wo.Delay = writeback.Async, time.Hour
	return newTestFSBacked(t, map[string]string{"a": "the old content"}, nil, nil, wo, &countingBacking{live: map[int32]bool{}})
}

// openCachedByPassthrough reads path until it is cached whole (a cold
// read's blocks are written in the background) and returns its inode and
// a passthrough open of it.
func openCachedByPassthrough(t *testing.T, f *testFS, path string) (uint64, fuse.OpenOut) {
	t.Helper()
	e, errno := f.lookup(path)
	if errno != 0 {
		t.Fatal(errno)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var out fuse.OpenOut
		if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Flags: syscall.O_RDONLY}, &out); s != fuse.OK {
			t.Fatal(s)
		}
		if out.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 {
			return e.NodeId, out
		}
		if _, errno := f.read(e.NodeId, out.Fh, 0, 100); errno != 0 {
			t.Fatal(errno)
		}
		f.release(e.NodeId, out.Fh)
		if time.Now().After(deadline) {
			t.Fatal("a cached file was not opened by passthrough: the test sees nothing")
		}
	}
}

// openAtTheLastRelease releases handle h of key's node ino, the last of
// its passthrough handles, and opens ino with flags at the end of that
// Release: before go-fuse lets go of the node's backing registration.
func openAtTheLastRelease(t *testing.T, f *testFS, key string, ino uint64, h fuse.OpenOut, flags uint32) fuse.OpenOut {
	t.Helper()
	var out fuse.OpenOut
	status := fuse.ENOSYS
	releaseHook = func(n *fileNode) {
		if n.key.get() != key { // another node's
			return
		}
		n.mu.Lock()
		last := n.ptOpen == 0
		n.mu.Unlock()
		if last && status == fuse.ENOSYS {
			status = f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}, Flags: flags}, &out)
		}
	}
	t.Cleanup(func() { releaseHook = nil })
	f.release(ino, h.Fh)
	releaseHook = nil
	if status != fuse.OK {
		t.Fatalf("the open at the last release: %v", status)
	}
	return out
}

// TestBackingHoldsFollowsSharedRegistrations: a registration two nodes
// share is let go for both; a node registered again since keeps its new one.
func TestBackingHoldsFollowsSharedRegistrations(t *testing.T) {
	b := newBackingHolds()
	x, y := &fileNode{}, &fileNode{}
	b.asking(x)
	b.registered(7, true)
	b.asking(y)
	b.registered(7, true)
	if !b.holds(x) || !b.holds(y) {
		t.Fatal("a registration's nodes are not held")
	}
	b.unregistered(7)
	if b.holds(x) || b.holds(y) {
		t.Fatal("a let-go registration still holds its nodes")
	}
	b.asking(x)
	b.registered(8, true)
	b.asking(x)
	b.registered(9, false) // failed: nothing more held
	b.unregistered(7)      // an id x no longer holds
	if !b.holds(x) {
		t.Fatal("letting go of an old id let go of the node's new one")
	}
	b.unregistered(8)
	if b.holds(x) || len(b.byID) != 0 || len(b.held) != 0 {
		t.Fatalf("left behind: %v %v", b.byID, b.held)
	}
}
