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
// the old bytes (found by TestRandomCallsMatchLocalDisk, and by hand with
// a reader, a dup, open(O_TRUNC) and close, then cat: 1 in 60 under load).
func TestAnOpenRightAfterTheLastReleaseGetsNoStaleBacking(t *testing.T) {
	wo := writeback.DefaultOptions()
	wo.Mode, wo.Delay = writeback.Async, time.Hour // the new content stays staged
	f := newTestFSBacked(t, map[string]string{"a": "the old content"}, nil, nil, wo, &countingBacking{live: map[int32]bool{}})
	e, errno := f.lookup("a")
	if errno != 0 {
		t.Fatal(errno)
	}
	ino := e.NodeId
	// Read until cached whole (the cold read's blocks are written in the
	// background): then an open is passthrough.
	var out fuse.OpenOut
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		out = fuse.OpenOut{}
		if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}, Flags: syscall.O_RDONLY}, &out); s != fuse.OK {
			t.Fatal(s)
		}
		if out.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 {
			break
		}
		if _, errno := f.read(ino, out.Fh, 0, 100); errno != 0 {
			t.Fatal(errno)
		}
		f.release(ino, out.Fh)
		if time.Now().After(deadline) {
			t.Fatal("a cached file was not opened by passthrough: the test sees nothing")
		}
	}
	reader, old := out.Fh, out.BackingID

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

	var again fuse.OpenOut
	status := fuse.ENOSYS
	releaseHook = func(n *fileNode) {
		if n != node { // another test's
			return
		}
		n.mu.Lock()
		last := n.ptOpen == 0
		n.mu.Unlock()
		if last && status == fuse.ENOSYS {
			status = f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}, Flags: syscall.O_RDONLY}, &again)
		}
	}
	t.Cleanup(func() { releaseHook = nil })
	f.release(ino, reader)
	releaseHook = nil
	if status != fuse.OK {
		t.Fatalf("the open after the reader's release: %v", status)
	}
	if again.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 && again.BackingID == old {
		t.Errorf("the open got the old content's backing registration %d", old)
	}
	if got, errno := f.read(ino, again.Fh, 0, 100); errno == 0 && again.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 && string(got) != "new" {
		t.Errorf("read %q, want the new content", got)
	}
	f.release(ino, again.Fh)
}
