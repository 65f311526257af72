package fs

import (
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestReadOnlyNodesHaveNoWriteState: the kernel may know millions of a
// dataset's files, each a node in the daemon, so the write-side state is
// made only for a file written here (README, Memory: the bytes per file
// the kernel knows). Every request a reader sends (lookup, getattr, open,
// read, fsync, close, the status xattr, a utime) leaves the node without
// one; a write makes it, and the write reaches the bucket.
func TestReadOnlyNodesHaveNoWriteState(t *testing.T) {
	f := newTestFS(t, map[string]string{"d/a": "some bytes"})
	e, st := f.lookup("d/a")
	if st != 0 {
		t.Fatalf("lookup: %v", st)
	}
	ino := fuse.InHeader{NodeId: e.NodeId}
	var attr fuse.AttrOut
	if s := f.raw.GetAttr(nil, &fuse.GetAttrIn{InHeader: ino}, &attr); s != fuse.OK {
		t.Fatalf("getattr: %v", s)
	}
	var out fuse.OpenOut
	if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: ino, Flags: syscall.O_RDONLY}, &out); s != fuse.OK {
		t.Fatalf("open: %v", s)
	}
	buf := make([]byte, 64)
	res, s := f.raw.Read(nil, &fuse.ReadIn{InHeader: ino, Fh: out.Fh, Size: uint32(len(buf))}, buf)
	if s != fuse.OK {
		t.Fatalf("read: %v", s)
	}
	res.Done()
	if s := f.raw.Fsync(nil, &fuse.FsyncIn{InHeader: ino, Fh: out.Fh}); s != fuse.OK {
		t.Fatalf("fsync of a file open for reading: %v", s)
	}
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: ino, Fh: out.Fh}); s != fuse.OK {
		t.Fatalf("flush: %v", s)
	}
	if _, s := f.raw.GetXAttr(nil, &ino, XattrStatus, make([]byte, 256)); s != fuse.OK {
		t.Fatalf("getxattr %s: %v", XattrStatus, s)
	}
	mtime := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: ino, Valid: fuse.FATTR_MTIME, Mtime: uint64(time.Now().Unix())}}
	if s := f.raw.SetAttr(nil, &mtime, &attr); s != fuse.OK {
		t.Fatalf("utime: %v", s)
	}
	f.raw.Release(nil, &fuse.ReleaseIn{InHeader: ino, Fh: out.Fh})
	n := f.fsys.Root().EmbeddedInode().GetChild("d").GetChild("a").Operations().(*fileNode)
	if n.peekWS() != nil {
		t.Fatal("a file only read has a write state")
	}

	if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: ino, Flags: syscall.O_WRONLY | syscall.O_TRUNC}, &out); s != fuse.OK {
		t.Fatalf("open for writing: %v", s)
	}
	if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: ino, Fh: out.Fh}, []byte("new")); s != fuse.OK {
		t.Fatalf("write: %v", s)
	}
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: ino, Fh: out.Fh}); s != fuse.OK {
		t.Fatalf("close: %v", s)
	}
	f.raw.Release(nil, &fuse.ReleaseIn{InHeader: ino, Fh: out.Fh})
	if n.peekWS() == nil {
		t.Fatal("a written file has no write state")
	}
	if got, _ := f.be.get("d/a"); got != "new" {
		t.Fatalf("the bucket holds %q after the write, want %q", got, "new")
	}
}
