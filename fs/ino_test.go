package fs

import (
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
