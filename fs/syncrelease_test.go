package fs

import (
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache/writeback"
)

// `: > file` (open(O_TRUNC), close, no write) changes the file; its
// close carries no new data of the closer, so the file is published at
// its RELEASE, which the kernel sends after close() has returned. A
// `strata sync` right after the close used to find no upload and return
// while the bucket still held the old bytes (the model test's seed 1 of
// async on fake-gcs-server, with the added calls). Sync must wait for the
// release, as it waits for a held upload's.
func TestSyncWaitsForTheReleaseOfATruncatedFile(t *testing.T) {
	for _, mode := range []writeback.Mode{writeback.Sync, writeback.Async} {
		t.Run(string(mode), func(t *testing.T) {
			wo := writeback.DefaultOptions()
			wo.Mode = mode
			f := newTestFSWriteback(t, map[string]string{"ckpt": "epoch 1"}, nil, nil, wo)
			e, errno := f.lookup("ckpt")
			if errno != 0 {
				t.Fatal(errno)
			}
			in := fuse.InHeader{NodeId: e.NodeId}
			fh := f.open(e.NodeId, syscall.O_WRONLY|syscall.O_TRUNC)
			if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: fh}); s != fuse.OK {
				t.Fatalf("flush: %v", s)
			}
			type answer struct {
				bucket string
				errno  syscall.Errno
			}
			synced := make(chan answer, 1)
			go func() {
				_, st := f.raw.GetXAttr(nil, &fuse.InHeader{NodeId: rootIno}, XattrSync, make([]byte, 4096))
				got, _ := f.be.get("ckpt")
				synced <- answer{got, syscall.Errno(st)}
			}()
			time.Sleep(200 * time.Millisecond) // the kernel's release, late on a loaded machine
			f.release(e.NodeId, fh)
			a := <-synced
			if a.errno != 0 {
				t.Fatalf("strata sync: %v", a.errno)
			}
			if a.bucket != "" {
				t.Errorf("strata sync returned with the bucket holding %q, want the truncated (empty) file", a.bucket)
			}
		})
	}
}

// A file a process keeps open costs a sync 2 s (README): one whose upload
// is held, one left dirty by a close without a write, or both at once.
// Sync waited for the second kind, then for the first, each up to 2 s.
func TestSyncWaitsForOpenFilesWithinOneBound(t *testing.T) {
	wo := writeback.DefaultOptions()
	wo.Mode = writeback.Async
	f := newTestFSWriteback(t, map[string]string{"a": "old a", "b": "old b"}, nil, nil, wo)
	for _, name := range []string{"a", "b"} {
		e, errno := f.lookup(name)
		if errno != 0 {
			t.Fatal(errno)
		}
		in := fuse.InHeader{NodeId: e.NodeId}
		fh := f.open(e.NodeId, syscall.O_WRONLY|syscall.O_TRUNC)
		if name == "a" { // written and closed once: its upload is held
			if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: fh}, []byte("new a")); s != fuse.OK {
				t.Fatalf("write: %v", s)
			}
		}
		if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: fh}); s != fuse.OK {
			t.Fatalf("flush: %v", s)
		}
		defer f.release(e.NodeId, fh) // still open when sync runs
	}
	start := time.Now()
	if _, st := f.raw.GetXAttr(nil, &fuse.InHeader{NodeId: rootIno}, XattrSync, make([]byte, 4096)); st != fuse.OK {
		t.Fatalf("strata sync: %v", syscall.Errno(st))
	}
	// 2 s, and what a loaded machine adds to it; the two waits one after
	// the other take 4 s.
	if took := time.Since(start); took > syncReleaseWait+1500*time.Millisecond {
		t.Errorf("strata sync took %v with two files open, want about %v", took, syncReleaseWait)
	}
}

// syncReleaseWait is how long strata sync waits for a RELEASE on its way
// (writeback's heldReleaseWait), as the README states.
const syncReleaseWait = 2 * time.Second
