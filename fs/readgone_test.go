package fs

import (
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestReadOfADeletedObjectIsStale: a file open on a version that was
// deleted from the bucket since reads its uncached blocks as ESTALE, as a
// changed object does (the README: "If the object changes, reads of that
// handle's uncached blocks fail with ESTALE"). Before the fix read(2)
// returned ENOENT, an errno read(2) never gives, which programs report as
// "No such file or directory" about a file they hold open.
func TestReadOfADeletedObjectIsStale(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 6<<16) // 6 MiB: not fetched whole at open
	f := newTestFS(t, map[string]string{"d/big": big})
	e, st := f.lookup("d/big")
	if st != 0 {
		t.Fatalf("lookup: %v", st)
	}
	var out fuse.OpenOut
	if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Flags: syscall.O_RDONLY}, &out); s != fuse.OK {
		t.Fatalf("open: %v", s)
	}
	defer f.raw.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Fh: out.Fh})
	f.be.mu.Lock()
	delete(f.be.objs, "d/big") // deleted in the bucket behind the mount's back
	f.be.mu.Unlock()

	buf := make([]byte, 4096)
	in := &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Fh: out.Fh, Offset: 5 << 20, Size: uint32(len(buf))}
	res, s := f.raw.Read(nil, in, buf)
	if res != nil {
		res.Done()
	}
	if s != fuse.Status(syscall.ESTALE) {
		t.Fatalf("read of an uncached block of a deleted object: %v, want ESTALE", s)
	}
}
