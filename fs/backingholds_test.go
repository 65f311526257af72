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

// TestAReadRightAfterASaveIsPassthrough: a file created and written by
// passthrough (torch.save, --upload async) and read right after its
// close (torch.load). close() returns before the daemon has the RELEASE,
// so the read's open can arrive while the writer's Release runs, before
// go-fuse lets go of the staging file's registration. The open was then
// served from userspace (found by TestReadRightAfterCloseIsPassthrough in
// a fresh-clone make test), though the registration goes within
// microseconds: it should wait for it, as it waits for writers' releases.
func TestAReadRightAfterASaveIsPassthrough(t *testing.T) {
	f := newBackedTestFS(t)
	var out fuse.CreateOut
	root := fuse.InHeader{NodeId: rootIno}
	if s := f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Flags: syscall.O_WRONLY, Mode: 0o644}, "saved", &out); s != fuse.OK {
		t.Fatalf("create: %v", s)
	}
	if out.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 {
		t.Fatal("the save was not written by passthrough")
	}
	in := fuse.InHeader{NodeId: out.NodeId}
	if n, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: out.Fh}, []byte("weights")); s != fuse.OK || n != 7 {
		t.Fatalf("write: %d, %v", n, s)
	}
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: out.Fh}); s != fuse.OK {
		t.Fatalf("flush: %v", s)
	}
	reader := openDuringTheLastRelease(t, f, "saved", out.NodeId, out.Fh, syscall.O_RDONLY)
	if reader.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 {
		t.Error("the read right after the save was served from userspace")
	}
	f.release(out.NodeId, reader.Fh)
}

// openDuringTheLastRelease releases handle fh of key's node ino, the
// last of its passthrough handles, and opens ino with flags from another
// goroutine started at the end of that Release, as the kernel sends an
// open that overtakes a RELEASE: the Release then goes on to let go of
// the backing registration while the open runs.
func openDuringTheLastRelease(t *testing.T, f *testFS, key string, ino, fh uint64, flags uint32) fuse.OpenOut {
	t.Helper()
	var out fuse.OpenOut
	var status fuse.Status
	opened := make(chan struct{})
	started := false
	releaseHook = func(n *fileNode) {
		if n.key.get() != key || started {
			return
		}
		n.mu.Lock()
		last := n.ptOpen == 0
		n.mu.Unlock()
		if last {
			started = true
			go func() {
				defer close(opened)
				status = f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}, Flags: flags}, &out)
			}()
			time.Sleep(20 * time.Millisecond) // the open is waiting when the Release goes on
		}
	}
	t.Cleanup(func() { releaseHook = nil })
	f.release(ino, fh)
	releaseHook = nil
	if !started {
		t.Fatal("the release was not the node's last")
	}
	<-opened
	if status != fuse.OK {
		t.Fatalf("the open during the last release: %v", status)
	}
	return out
}
