package fs

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/writeback"
)

// TestAFileGoneKeepsItsBytesForItsOtherDescriptors: a file open twice
// whose name is deleted or replaced lives on for its descriptors, as on
// local disk: closing one of them must not throw away what the file
// holds while the other still reads and writes it. The first close after
// the name went discarded the staged bytes, and the other descriptor's
// reads, writes and fsync failed with ESTALE (found by
// TestRandomCallsMatchLocalDisk).
func TestAFileGoneKeepsItsBytesForItsOtherDescriptors(t *testing.T) {
	for _, how := range []string{"unlink", "rename over"} {
		t.Run(how, func(t *testing.T) {
			f := newTestFS(t, nil)
			root := fuse.InHeader{NodeId: rootIno}
			var out fuse.CreateOut
			if s := f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Flags: syscall.O_RDWR, Mode: 0o644}, "f", &out); s != fuse.OK {
				t.Fatalf("create: %v", s)
			}
			in := fuse.InHeader{NodeId: out.NodeId}
			write := func(fh, off uint64, data string) {
				t.Helper()
				if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: fh, Offset: off}, []byte(data)); s != fuse.OK {
					t.Fatalf("write: %v", s)
				}
			}
			write(out.Fh, 0, "first ")
			second := f.open(out.NodeId, syscall.O_RDWR)
			write(second, 6, "second ")
			switch how {
			case "unlink":
				if s := f.raw.Unlink(nil, &root, "f"); s != fuse.OK {
					t.Fatalf("unlink: %v", s)
				}
			default:
				in2, fh2 := f.createSynced("g", "new")
				f.release(in2.NodeId, fh2)
				if errno := f.rename("g", "f", 0); errno != 0 {
					t.Fatalf("rename: %v", errno)
				}
			}
			write(out.Fh, 13, "more")
			if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: out.Fh}); s != fuse.OK {
				t.Fatalf("flush of the first descriptor: %v", s)
			}
			f.release(out.NodeId, out.Fh)

			if got, errno := f.read(out.NodeId, second, 0, 100); errno != 0 || string(got) != "first second more" {
				t.Errorf("read through the other descriptor: %q, %v; want %q", got, errno, "first second more")
			}
			write(second, 17, "!")
			if s := f.raw.Fsync(nil, &fuse.FsyncIn{InHeader: in, Fh: second}); s != fuse.OK {
				t.Errorf("fsync through the other descriptor: %v", s)
			}
			if got, errno := f.read(out.NodeId, second, 0, 100); errno != 0 || string(got) != "first second more!" {
				t.Errorf("read after its write: %q, %v", got, errno)
			}
			if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: second}); s != fuse.OK {
				t.Errorf("flush of the other descriptor: %v", s)
			}
			f.release(out.NodeId, second)
			want := map[string]string{}
			if how != "unlink" {
				want["f"] = "new"
			}
			for _, k := range f.be.keys() {
				if got, _ := f.be.get(k); want[k] != got || !bytes.Equal([]byte(got), []byte(want[k])) {
					t.Errorf("the bucket holds %q = %q", k, got)
				}
			}
			if len(f.be.keys()) != len(want) {
				t.Errorf("the bucket holds %q, want %q", f.be.keys(), want)
			}
		})
	}
}

// TestAFileGoneDoesNotHoldItsNameAsWritten: a file whose name went but
// which a descriptor still holds goes on taking writes; its session must
// not count as the name being written. It did: once the file that took
// the name was uploaded, the name still showed a local entry, and that
// file's next truncation or write staged from the bucket with a local
// version, failing with ESTALE (found by TestRandomCallsMatchLocalDisk).
func TestAFileGoneDoesNotHoldItsNameAsWritten(t *testing.T) {
	f := newTestFS(t, nil)
	create := f.createWritten
	oldIn, oldFh := create("f", "old")
	newIn, newFh := create("g", "new")
	if errno := f.rename("g", "f", 0); errno != 0 {
		t.Fatalf("rename g f: %v", errno)
	}
	if s := f.raw.Fsync(nil, &fuse.FsyncIn{InHeader: newIn, Fh: newFh}); s != fuse.OK {
		t.Fatalf("fsync of the file that took the name: %v", s)
	}
	in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: newIn, Valid: fuse.FATTR_SIZE | fuse.FATTR_FH, Fh: newFh, Size: 2}}
	var out fuse.AttrOut
	if s := f.raw.SetAttr(nil, in, &out); s != fuse.OK {
		t.Errorf("ftruncate of the file that took the name: %v", s)
	}
	for _, h := range []struct {
		in fuse.InHeader
		fh uint64
	}{{newIn, newFh}, {oldIn, oldFh}} {
		if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: h.in, Fh: h.fh}); s != fuse.OK {
			t.Errorf("close: %v", s)
		}
		f.release(h.in.NodeId, h.fh)
	}
	if _, err := f.fsys.wb.WaitAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.be.get("f"); got != "ne" {
		t.Errorf("f holds %q, want %q (bucket %q)", got, "ne", f.be.keys())
	}
}

// TestTheLastCloseOfAGoneFileLetsGoNothingOfItsName: in --upload async a
// close of one descriptor of a file still open elsewhere journals it but
// holds its upload for the file's last close, so that a writer that
// forked, or a program that closes a dup, publishes nothing half written.
// The last close of another file, one whose name was deleted or renamed
// over, let the held upload of the file now at the name start: the bucket
// got that file as it stood at the first close, while it was still being
// written.
func TestTheLastCloseOfAGoneFileLetsGoNothingOfItsName(t *testing.T) {
	for _, how := range []string{"unlink", "rename over"} {
		t.Run(how, func(t *testing.T) {
			wo := writeback.DefaultOptions()
			wo.Mode = writeback.Async
			f := newTestFSWriteback(t, nil, nil, nil, wo)
			root := fuse.InHeader{NodeId: rootIno}
			create := f.createWritten
			goneIn, goneFh := create("f", "gone")
			var nowIn fuse.InHeader
			var nowFh uint64
			switch how {
			case "unlink":
				if s := f.raw.Unlink(nil, &root, "f"); s != fuse.OK {
					t.Fatalf("unlink: %v", s)
				}
				nowIn, nowFh = create("f", "half")
			default:
				nowIn, nowFh = create("g", "half")
				if errno := f.rename("g", "f", 0); errno != 0 {
					t.Fatalf("rename g f: %v", errno)
				}
			}
			// The file at the name, open twice: one descriptor is closed
			// (a forked child's copy), the other still writes.
			other := f.open(nowIn.NodeId, syscall.O_RDWR)
			if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: nowIn, Fh: nowFh}); s != fuse.OK {
				t.Fatalf("close of one descriptor: %v", s)
			}
			f.release(nowIn.NodeId, nowFh)
			held := func(when string) {
				t.Helper()
				for _, u := range f.fsys.wb.Uploads() {
					if u.Key == "f" && u.State != writeback.StateHeld {
						t.Errorf("%s: the upload of f is %s, want %s until its last close", when, u.State, writeback.StateHeld)
					}
				}
			}
			held("after one descriptor's close")

			if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: goneIn, Fh: goneFh}); s != fuse.OK {
				t.Fatalf("close of the gone file: %v", s)
			}
			f.release(goneIn.NodeId, goneFh)
			held("after the gone file's last close")

			if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: nowIn, Fh: other, Offset: 4}, []byte(" and whole")); s != fuse.OK {
				t.Fatal(s)
			}
			if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: nowIn, Fh: other}); s != fuse.OK {
				t.Fatalf("last close: %v", s)
			}
			f.release(nowIn.NodeId, other)
			if _, err := f.fsys.wb.WaitAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, _ := f.be.get("f"); got != "half and whole" {
				t.Errorf("f holds %q, want %q (bucket %q)", got, "half and whole", f.be.keys())
			}
		})
	}
}

// createWritten creates name in the root, open for reading and writing,
// and writes data into it; it returns the node's header and the handle.
func (f *testFS) createWritten(name, data string) (fuse.InHeader, uint64) {
	f.t.Helper()
	var out fuse.CreateOut
	root := fuse.InHeader{NodeId: rootIno}
	if s := f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Flags: syscall.O_RDWR, Mode: 0o644}, name, &out); s != fuse.OK {
		f.t.Fatalf("create %s: %v", name, s)
	}
	in := fuse.InHeader{NodeId: out.NodeId}
	if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: out.Fh}, []byte(data)); s != fuse.OK {
		f.t.Fatal(s)
	}
	return in, out.Fh
}

// TestADescriptorOfAGoneFileOutlivesTheGrace: a file closed (its upload
// pending, --upload async), opened again, then deleted or replaced by a
// rename over it before that descriptor wrote. Its bytes were only in
// the pending upload, which the unlink or rename cancels; the node kept
// them for cache.ReplacedGrace (for a reader that looked the name up just
// before) and then let them go, though the descriptor was still open:
// its reads and writes after that failed with ESTALE (found by
// TestRandomCallsMatchLocalDisk, seed 35 of `async`). On local disk the
// file lives on for its descriptors until the last one closes.
func TestADescriptorOfAGoneFileOutlivesTheGrace(t *testing.T) {
	for _, how := range []string{"unlink", "rename over"} {
		t.Run(how, func(t *testing.T) {
			shortenOrphanGrace(t, 10*time.Millisecond)
			wo := writeback.DefaultOptions()
			wo.Mode = writeback.Async // 5 s delay: the upload stays pending
			f := newTestFSWriteback(t, nil, nil, nil, wo)
			in, fh := f.createWritten("f", "old bytes")
			if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: fh}); s != fuse.OK {
				t.Fatalf("close: %v", s)
			}
			f.release(in.NodeId, fh)
			fh = f.open(in.NodeId, syscall.O_RDWR)
			f.nameGoes(how, "f", f.createWritten)
			time.Sleep(50 * time.Millisecond) // the grace has passed
			if got, errno := f.read(in.NodeId, fh, 0, 100); errno != 0 || string(got) != "old bytes" {
				t.Errorf("read through the descriptor after the grace: %q, %v; want %q", got, errno, "old bytes")
			}
			f.writeThroughTheGoneFile(in, fh)
			f.wantBucket(how, "f")
		})
	}
}

// shortenOrphanGrace sets how long a gone file's committed bytes are kept
// for opens after its name went, for one test.
func shortenOrphanGrace(t *testing.T, d time.Duration) {
	old := orphanGrace
	orphanGrace = d
	t.Cleanup(func() { orphanGrace = old })
}

// TestADescriptorOfAGoneFileKeepsItsCachedCopy: a file of the bucket, read
// whole (cached) and open for writing, not written yet, is replaced by a
// rename over it or deleted. Its first write stages the version it has,
// which only the cache still holds: the bucket's name holds the new file
// or nothing. The cache let that version go (a replaced version is
// retired after cache.ReplacedGrace), though the descriptor was open,
// and the write failed with ESTALE (found by
// TestRandomCallsMatchLocalDisk, seed 35 of `async`: a pwrite 1.5 s after
// the rename over the file). A file whose name went keeps its cached copy
// until its last descriptor is released.
func TestADescriptorOfAGoneFileKeepsItsCachedCopy(t *testing.T) {
	for _, how := range []string{"unlink", "rename over"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel() // each waits out the cache's grace
			f := newTestFS(t, map[string]string{"f": "old bytes"})
			e, errno := f.lookup("f")
			if errno != 0 {
				t.Fatalf("lookup f: %v", errno)
			}
			in := fuse.InHeader{NodeId: e.NodeId}
			rfh := f.open(e.NodeId, syscall.O_RDONLY)
			if got, errno := f.read(e.NodeId, rfh, 0, 100); errno != 0 || string(got) != "old bytes" {
				t.Fatalf("read: %q, %v", got, errno)
			}
			f.release(e.NodeId, rfh)
			fh := f.open(e.NodeId, syscall.O_RDWR)
			f.nameGoes(how, "f", f.createSynced)
			time.Sleep(cache.ReplacedGrace + 500*time.Millisecond) // the replaced version retired
			f.writeThroughTheGoneFile(in, fh)
			f.wantBucket(how, "f")
		})
	}
}

// TestADescriptorOfAGoneFileKeepsItsLandedVersion: as above, for a file
// written on this mount whose upload was pending when the kernel looked
// it up again (after forgetting the writer's inode) and opened it for
// writing, and landed before another file was renamed over it. That
// node stands for the local entry, not for a version: it knew no
// version to keep, the cache retired the landed one after its grace, and
// the descriptor's first write failed with ESTALE (found by
// TestRandomCallsMatchLocalDisk, seed 35 of `async`).
func TestADescriptorOfAGoneFileKeepsItsLandedVersion(t *testing.T) {
	t.Parallel() // it waits out the cache's grace
	wo := writeback.DefaultOptions()
	wo.Mode = writeback.Async // 5 s delay: pending until WaitAll
	f := newTestFSWriteback(t, nil, nil, nil, wo)
	in, fh := f.createWritten("f", "old bytes")
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: fh}); s != fuse.OK {
		t.Fatalf("close: %v", s)
	}
	f.release(in.NodeId, fh)
	f.raw.Forget(in.NodeId, 1) // drop_caches: the kernel forgets the writer's inode
	e, errno := f.lookup("f")
	if errno != 0 {
		t.Fatalf("lookup f: %v", errno)
	}
	in = fuse.InHeader{NodeId: e.NodeId}
	fh = f.open(e.NodeId, syscall.O_RDWR)
	if _, err := f.fsys.wb.WaitAll(context.Background()); err != nil { // the upload lands
		t.Fatal(err)
	}
	f.nameGoes("rename over", "f", f.createSynced)
	time.Sleep(cache.ReplacedGrace + 500*time.Millisecond) // the replaced version retired
	f.writeThroughTheGoneFile(in, fh)
	f.wantBucket("rename over", "f")
}

// nameGoes unlinks name in the root, or ("rename over") renames over it
// a file "g" holding "new", made by create.
func (f *testFS) nameGoes(how, name string, create func(name, data string) (fuse.InHeader, uint64)) {
	f.t.Helper()
	if how == "unlink" {
		if s := f.raw.Unlink(nil, &fuse.InHeader{NodeId: rootIno}, name); s != fuse.OK {
			f.t.Fatalf("unlink %s: %v", name, s)
		}
		return
	}
	gIn, gFh := create("g", "new")
	f.release(gIn.NodeId, gFh)
	if errno := f.rename("g", name, 0); errno != 0 {
		f.t.Fatalf("rename g %s: %v", name, errno)
	}
}

// writeThroughTheGoneFile writes "BYTES" at 4 through handle fh of a file
// holding "old bytes" whose name went, reads it back, and closes it.
func (f *testFS) writeThroughTheGoneFile(in fuse.InHeader, fh uint64) {
	f.t.Helper()
	if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: fh, Offset: 4}, []byte("BYTES")); s != fuse.OK {
		f.t.Errorf("write through the descriptor: %v", s)
	}
	if got, errno := f.read(in.NodeId, fh, 0, 100); errno != 0 || string(got) != "old BYTES" {
		f.t.Errorf("read after the write: %q, %v; want %q", got, errno, "old BYTES")
	}
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: fh}); s != fuse.OK {
		f.t.Errorf("close: %v", s)
	}
	f.release(in.NodeId, fh)
}

// wantBucket checks, once every upload settled, that the bucket holds
// nothing of a gone file: name is gone ("unlink"), or holds the "new" of
// the file renamed over it.
func (f *testFS) wantBucket(how, name string) {
	f.t.Helper()
	if _, err := f.fsys.wb.WaitAll(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	want := map[string]string{}
	if how != "unlink" {
		want[name] = "new"
	}
	for _, k := range f.be.keys() {
		if got, _ := f.be.get(k); got != want[k] {
			f.t.Errorf("the bucket holds %q = %q", k, got)
		}
	}
	if len(f.be.keys()) != len(want) {
		f.t.Errorf("the bucket holds %q, want %q", f.be.keys(), want)
	}
}
