package fs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestALookupGivesTheSizeOfAFileBeingWritten: the kernel takes the size a
// LOOKUP or a READDIRPLUS entry gives for an inode it holds, and appends
// at that size. It looks a name up again while the file is open (an
// open with O_EXCL, a rename's target, an expired entry): answered with
// the size the file had in the tree, not what it has been written to
// since, it cut its own, and the next O_APPEND write overwrote what was
// written (found by TestRandomCallsMatchLocalDisk: a log lost its first
// lines). go-fuse keeps the node the kernel has and drops the one a lookup
// makes: the answer must be the kept one's.
func TestALookupGivesTheSizeOfAFileBeingWritten(t *testing.T) {
	f := newTestFS(t, map[string]string{"old": "twelve bytes"})
	root := fuse.InHeader{NodeId: rootIno}
	for _, name := range []string{"new", "old"} {
		var fh uint64
		var in fuse.InHeader
		if name == "new" {
			var out fuse.CreateOut
			if s := f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Flags: syscall.O_WRONLY | syscall.O_APPEND, Mode: 0o644}, name, &out); s != fuse.OK {
				t.Fatalf("create: %v", s)
			}
			in, fh = fuse.InHeader{NodeId: out.NodeId}, out.Fh
		} else {
			e, errno := f.lookup(name)
			if errno != 0 {
				t.Fatal(errno)
			}
			in = fuse.InHeader{NodeId: e.NodeId}
			fh = f.open(e.NodeId, syscall.O_WRONLY|syscall.O_APPEND)
		}
		if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: fh, Offset: 12}, make([]byte, 17945)); s != fuse.OK {
			t.Fatal(s)
		}
		const want = 12 + 17945
		if e, errno := f.lookup(name); errno != 0 || e.NodeId != in.NodeId || e.Attr.Size != want {
			t.Errorf("%s: lookup while written: node %d size %d (%v), want node %d size %d", name, e.NodeId, e.Attr.Size, errno, in.NodeId, want)
		}
		if e := f.readdirPlus("")[name]; e.NodeId != in.NodeId || e.Attr.Size != want {
			t.Errorf("%s: readdirplus while written: node %d size %d, want node %d size %d", name, e.NodeId, e.Attr.Size, in.NodeId, want)
		}
		f.release(in.NodeId, fh)
	}
}
