package fs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestPathTruncateIsNotInterrupted: truncate(path) uploads the file at
// once (sync mode waits for it). The kernel interrupts a request whenever
// the calling thread gets a signal, and every Go program signals itself
// (SIGURG preemption): the truncate must still complete, not fail with
// EINTR (posixtest's TruncateNoFile did, in a fresh-clone make test).
func TestPathTruncateIsNotInterrupted(t *testing.T) {
	f := newTestFS(t, map[string]string{"d/x": "twelve bytes"})
	out, errno := f.lookup("d/x")
	if errno != 0 {
		t.Fatal(errno)
	}
	interrupted := make(chan struct{})
	close(interrupted)
	in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: fuse.InHeader{NodeId: out.NodeId}, Valid: fuse.FATTR_SIZE, Size: 3}}
	var attr fuse.AttrOut
	if st := f.raw.SetAttr(interrupted, in, &attr); st != fuse.OK {
		t.Fatalf("truncate(path) with the caller signalled: %v", syscall.Errno(st))
	}
	if got, ok := f.be.get("d/x"); !ok || got != "twe" {
		t.Fatalf("bucket after truncate: %q %v", got, ok)
	}
}
