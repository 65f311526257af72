package fs

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestHandleReadsItsOwnSyncedWrites: a descriptor reads what was written
// through it, also once fsync has put it in the bucket, and so does
// every other descriptor of the file (on local disk they are one file).
// SQLite does exactly this: it writes pages, fdatasyncs, then reads the
// header back through the same descriptor; reading the version the
// descriptor had read first made it see an empty table after its commit.
// The kernel's page cache hides it until it drops the pages (memory
// pressure, drop_caches, an attribute change), so the harness, which has
// no page cache, sees every read.
func TestHandleReadsItsOwnSyncedWrites(t *testing.T) {
	f := newTestFS(t, map[string]string{"db": "0123456789"})
	e, st := f.lookup("db")
	if st != 0 {
		t.Fatalf("lookup: %v", st)
	}
	ino := fuse.InHeader{NodeId: e.NodeId}
	open := func(flags uint32) uint64 {
		var out fuse.OpenOut
		if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: ino, Flags: flags}, &out); s != fuse.OK {
			t.Fatalf("open: %v", s)
		}
		return out.Fh
	}
	read := func(fh uint64) string {
		buf := make([]byte, 64)
		res, s := f.raw.Read(nil, &fuse.ReadIn{InHeader: ino, Fh: fh, Size: uint32(len(buf))}, buf)
		if s != fuse.OK {
			t.Fatalf("read: %v", s)
		}
		defer res.Done()
		b, _ := res.Bytes(buf)
		return string(b)
	}
	write := func(fh uint64, data string) {
		if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: ino, Fh: fh}, []byte(data)); s != fuse.OK {
			t.Fatalf("write: %v", s)
		}
	}
	fsync := func(fh uint64) {
		if s := f.raw.Fsync(nil, &fuse.FsyncIn{InHeader: ino, Fh: fh}); s != fuse.OK {
			t.Fatalf("fsync: %v", s)
		}
	}

	rw := open(syscall.O_RDWR)
	if got := read(rw); got != "0123456789" {
		t.Fatalf("first read %q", got)
	}
	for i, w := range []struct{ data, content string }{{"ab", "ab23456789"}, {"XYZ", "XYZ3456789"}} {
		content := w.content
		write(rw, w.data)
		if got := read(rw); got != content {
			t.Fatalf("write %d: read before fsync %q, want %q", i, got, content)
		}
		fsync(rw)
		if got, _ := f.be.get("db"); got != content {
			t.Fatalf("write %d: the bucket holds %q after fsync", i, got)
		}
		if got := read(rw); got != content {
			t.Fatalf("write %d: the writer's descriptor reads %q after fsync, want %q", i, got, content)
		}
		ro := open(syscall.O_RDONLY)
		if got := read(ro); got != content {
			t.Fatalf("write %d: a new descriptor reads %q, want %q", i, got, content)
		}
		f.raw.Release(nil, &fuse.ReleaseIn{InHeader: ino, Fh: ro})
	}
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: ino, Fh: rw}); s != fuse.OK {
		t.Fatalf("close: %v", s)
	}
	f.raw.Release(nil, &fuse.ReleaseIn{InHeader: ino, Fh: rw})
}

// TestHandleFollowsItsNodeUnderConcurrentReads: reads of one handle that
// race its node moving on to the version its own fsync uploaded each
// return the file's bytes, never an error, and the old version's cache
// object is let go with no read on it (run under -race).
func TestHandleFollowsItsNodeUnderConcurrentReads(t *testing.T) {
	const size = 4096
	f := newTestFS(t, map[string]string{"f": strings.Repeat("0", size)})
	e, st := f.lookup("f")
	if st != 0 {
		t.Fatalf("lookup: %v", st)
	}
	ino := fuse.InHeader{NodeId: e.NodeId}
	var out fuse.OpenOut
	if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: ino, Flags: syscall.O_RDWR}, &out); s != fuse.OK {
		t.Fatalf("open: %v", s)
	}
	fh := out.Fh
	versions := "0123456789"
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan string, 16)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, s := f.raw.Read(nil, &fuse.ReadIn{InHeader: ino, Fh: fh, Size: size}, buf)
				if s != fuse.OK {
					errs <- fmt.Sprintf("read: %v", s)
					return
				}
				b, _ := res.Bytes(buf)
				got := string(b)
				res.Done()
				// A read racing a write may see part of it (as on
				// local disk); never bytes of no version, nor short.
				if len(got) != size || strings.Trim(got, versions) != "" {
					errs <- fmt.Sprintf("read %d bytes, not all of a version: %.8q...", len(got), got)
					return
				}
			}
		}()
	}
	for _, v := range versions[1:] {
		if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: ino, Fh: fh}, []byte(strings.Repeat(string(v), size))); s != fuse.OK {
			t.Fatalf("write: %v", s)
		}
		if s := f.raw.Fsync(nil, &fuse.FsyncIn{InHeader: ino, Fh: fh}); s != fuse.OK {
			t.Fatalf("fsync: %v", s)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	buf := make([]byte, size)
	res, s := f.raw.Read(nil, &fuse.ReadIn{InHeader: ino, Fh: fh, Size: size}, buf)
	if s != fuse.OK {
		t.Fatalf("read: %v", s)
	}
	if b, _ := res.Bytes(buf); string(b) != strings.Repeat("9", size) {
		t.Fatalf("the last read is %.8q..., want the last version", b)
	}
	res.Done()
	f.raw.Release(nil, &fuse.ReleaseIn{InHeader: ino, Fh: fh})
}
