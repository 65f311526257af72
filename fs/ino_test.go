package fs

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestAttributeRepliesKeepTheInodeNumber: every reply that carries
// attributes carries the inode number, since the kernel takes it from
// each of them (fuse_change_attributes_common sets i_ino). A SETATTR
// reply with none (ftruncate, utimes, chmod) made stat(2) show inode 0
// until the attributes were fetched again, and the root was 0 from the
// start: SQLite, which compares the inode of its open database with the
// path's to see whether the file was moved, then took a database it had
// just checkpointed (ftruncate) for moved and left its -wal and -shm
// files behind; tools that tell files apart by (device, inode) saw one.
func TestAttributeRepliesKeepTheInodeNumber(t *testing.T) {
	f := newTestFS(t, map[string]string{"d/a": "some bytes"})
	var root fuse.AttrOut
	if s := f.raw.GetAttr(nil, &fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: rootIno}}, &root); s != fuse.OK {
		t.Fatalf("getattr of the root: %v", s)
	}
	if root.Ino != fuse.FUSE_ROOT_ID {
		t.Errorf("the root's inode number is %d, want %d", root.Ino, fuse.FUSE_ROOT_ID)
	}
	for _, path := range []string{"d/a", "d"} {
		e, st := f.lookup(path)
		if st != 0 {
			t.Fatalf("lookup %s: %v", path, st)
		}
		if e.Attr.Ino == 0 {
			t.Fatalf("lookup %s: inode number 0", path)
		}
		in := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: fuse.InHeader{NodeId: e.NodeId},
			Valid: fuse.FATTR_MTIME | fuse.FATTR_MODE, Mtime: uint64(time.Now().Unix()), Mode: 0o600}}
		if path == "d/a" {
			in.Valid |= fuse.FATTR_SIZE
			in.Size = 4
		}
		var out fuse.AttrOut
		if s := f.raw.SetAttr(nil, &in, &out); s != fuse.OK {
			t.Fatalf("setattr %s: %v", path, s)
		}
		if out.Ino != e.Attr.Ino {
			t.Errorf("setattr %s: the reply's inode number is %d, want %d", path, out.Ino, e.Attr.Ino)
		}
		if path == "d/a" && (out.Size != 4 || out.Mode&syscall.S_IFMT != syscall.S_IFREG) {
			t.Errorf("setattr %s: size %d mode %o", path, out.Size, out.Mode)
		}
	}
}

// TestAWrittenFileKeepsItsNodeOnceForgotten: once a file written here
// is in the bucket, the mount stops tracking it by key (the sweep in
// trackLocal), but the kernel still has its node: a lookup of its name
// (the kernel revalidates a rename's target) must find that node, not
// make a second one for the same file. With a second one, a rename over
// the name marked only the new node replaced, and a descriptor still open
// for writing on the first uploaded its writes over the renamed file.
func TestAWrittenFileKeepsItsNodeOnceForgotten(t *testing.T) {
	f := newTestFS(t, nil)
	a, fh := f.createSynced("a", "old")
	if got, _ := f.be.get("a"); got != "old" {
		t.Fatalf("the bucket holds %q after fsync", got)
	}
	f.fsys.localUnder("") // what trackLocal's sweep does after 64 files
	e, st := f.lookup("a")
	if st != 0 {
		t.Fatalf("lookup: %v", st)
	}
	if e.NodeId != a.NodeId {
		t.Fatalf("the name's lookup gave node %d (inode %d), the file open for writing is node %d", e.NodeId, e.Attr.Ino, a.NodeId)
	}
	b, bfh := f.createSynced("b", "new!!")
	f.release(b.NodeId, bfh)
	if errno := f.rename("b", "a", 0); errno != 0 {
		t.Fatalf("rename: %v", errno)
	}
	if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: a, Fh: fh, Offset: 3}, []byte("APPENDED")); s != fuse.OK {
		t.Fatalf("write to the replaced file: %v", s)
	}
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: a, Fh: fh}); s != fuse.OK {
		t.Fatalf("flush of the replaced file: %v", s)
	}
	f.release(a.NodeId, fh)
	if got, _ := f.be.get("a"); got != "new!!" {
		t.Errorf("the bucket's a is %q, want the file renamed over it, %q", got, "new!!")
	}
}

// TestWritesAfterAnUnlinkShowNoName: a process writes to a file it holds
// open after the file was deleted (a log removed under its writer). On
// local disk the writes go to the unlinked file and the name stays gone;
// here the first write after the unlink started a write session that
// listed the name again, a local entry nothing would ever upload or
// clear: `ls` showed the deleted file and reading it gave ESTALE.
func TestWritesAfterAnUnlinkShowNoName(t *testing.T) {
	f := newTestFS(t, nil)
	root := fuse.InHeader{NodeId: rootIno}
	var out fuse.CreateOut
	if s := f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Flags: syscall.O_WRONLY, Mode: 0o644}, "log", &out); s != fuse.OK {
		t.Fatalf("create: %v", s)
	}
	in := fuse.InHeader{NodeId: out.NodeId}
	write := func(off uint64, data string) {
		if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: out.Fh, Offset: off}, []byte(data)); s != fuse.OK {
			t.Fatalf("write: %v", s)
		}
	}
	write(0, "line 1\n")
	if s := f.raw.Fsync(nil, &fuse.FsyncIn{InHeader: in, Fh: out.Fh}); s != fuse.OK {
		t.Fatalf("fsync: %v", s)
	}
	if s := f.raw.Unlink(nil, &root, "log"); s != fuse.OK {
		t.Fatalf("unlink: %v", s)
	}
	write(7, "line 2\n")
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: out.Fh}); s != fuse.OK {
		t.Fatalf("flush: %v", s)
	}
	f.release(out.NodeId, out.Fh)
	if e, st := f.lookup("log"); st != syscall.ENOENT {
		t.Errorf("lookup of the deleted name: errno %v (size %d), want ENOENT", st, e.Attr.Size)
	}
	if names := f.readdir(""); len(names) != 0 {
		t.Errorf("the root lists %q after the only file was deleted", names)
	}
	if keys := f.be.keys(); len(keys) != 0 {
		t.Errorf("the bucket holds %q", keys)
	}
}

// TestANodeMadeAfterTheKernelForgotAWrittenFileKeepsItsNumber: the
// kernel forgets a written file's node once nothing holds it (memory
// pressure, drop_caches), and the next lookup makes a new node; while the
// mount still tracked the written one, the new node got the written one's
// inode number. Once the mount forgot the written node too, a lookup
// numbered the file from its bucket version, a third node for what the
// kernel held as the second: a process that opened the second for
// writing then wrote through a node no rename or unlink reached (seen
// under a race-built daemon while another job dropped the caches).
func TestANodeMadeAfterTheKernelForgotAWrittenFileKeepsItsNumber(t *testing.T) {
	f := newTestFS(t, nil)
	in, fh := f.createSynced("a", "old")
	f.release(in.NodeId, fh)
	if _, err := f.fsys.wb.WaitAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.raw.Forget(in.NodeId, 1) // the kernel evicts it: nothing holds it
	second, st := f.lookup("a")
	if st != 0 {
		t.Fatalf("lookup after the forget: %v", st)
	}
	f.fsys.localUnder("") // what trackLocal's sweep does after 64 files
	third, st := f.lookup("a")
	if st != 0 {
		t.Fatalf("lookup after the sweep: %v", st)
	}
	if third.NodeId != second.NodeId || third.Attr.Ino != second.Attr.Ino {
		t.Errorf("the name's node changed from %d (inode %d) to %d (inode %d) with nothing renamed or forgotten", second.NodeId, second.Attr.Ino, third.NodeId, third.Attr.Ino)
	}
}

// createSynced creates name in the root, writes data and fsyncs it (its
// upload complete), and returns the node and the open handle.
func (f *testFS) createSynced(name, data string) (fuse.InHeader, uint64) {
	f.t.Helper()
	var out fuse.CreateOut
	root := fuse.InHeader{NodeId: rootIno}
	if s := f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Flags: syscall.O_WRONLY, Mode: 0o644}, name, &out); s != fuse.OK {
		f.t.Fatalf("create %s: %v", name, s)
	}
	in := fuse.InHeader{NodeId: out.NodeId}
	if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: out.Fh}, []byte(data)); s != fuse.OK {
		f.t.Fatalf("write %s: %v", name, s)
	}
	if s := f.raw.Fsync(nil, &fuse.FsyncIn{InHeader: in, Fh: out.Fh}); s != fuse.OK {
		f.t.Fatalf("fsync %s: %v", name, s)
	}
	return in, out.Fh
}
