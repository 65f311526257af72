package fs

import (
	"os"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Strata stores no extended attributes: setting or removing one is "not
// supported" (what cp -p and rsync treat as a filesystem without xattrs),
// never ENODATA, which cp reports as a failure to preserve permissions.
func TestSetxattrIsNotSupported(t *testing.T) {
	f := newTestFS(t, map[string]string{"dir/a.txt": "aaa"})
	file, errno := f.lookup("dir/a.txt")
	if errno != 0 {
		t.Fatal(errno)
	}
	for _, node := range []struct {
		name string
		ino  uint64
	}{{"root", rootIno}, {"dir", f.dirIno("dir")}, {"file", file.NodeId}} {
		for _, attr := range []string{"system.posix_acl_access", "system.posix_acl_default", "user.x", "security.selinux", XattrSync, XattrStatus} {
			in := &fuse.SetXAttrIn{InHeader: fuse.InHeader{NodeId: node.ino}, Size: 1}
			if st := f.raw.SetXAttr(nil, in, attr, []byte("v")); syscall.Errno(st) != syscall.ENOTSUP {
				t.Errorf("setxattr %s on %s: %v, want ENOTSUP", attr, node.name, syscall.Errno(st))
			}
			if st := f.raw.RemoveXAttr(nil, &fuse.InHeader{NodeId: node.ino}, attr); syscall.Errno(st) != syscall.ENOTSUP {
				t.Errorf("removexattr %s on %s: %v, want ENOTSUP", attr, node.name, syscall.Errno(st))
			}
		}
		// Reading an attribute that is not there stays ENODATA (cp -a
		// from the mount reads the ACL and finds none).
		if _, st := f.raw.GetXAttr(nil, &fuse.InHeader{NodeId: node.ino}, "system.posix_acl_access", nil); syscall.Errno(st) != syscall.ENODATA {
			t.Errorf("getxattr of a missing attribute on %s: %v, want ENODATA", node.name, syscall.Errno(st))
		}
	}
}

// user.strata.sync answers for the whole mount (every pending upload, the
// failed ones with their keys and where their data is kept): only root,
// the user running the mount and the user it presents files as may read it.
func TestSyncXattrOnlyForTheMountsUsers(t *testing.T) {
	const owner = 1234 // --uid
	f := newTestFSWith(t, map[string]string{"dir/a.txt": "aaa"}, func(o *Options) { o.UID = owner })
	get := func(uid uint32) syscall.Errno {
		h := &fuse.InHeader{NodeId: f.dirIno("dir")}
		h.Caller.Uid = uid
		_, st := f.raw.GetXAttr(nil, h, XattrSync, nil)
		return syscall.Errno(st)
	}
	if errno := get(0); errno != 0 {
		t.Errorf("root reading %s: %v", XattrSync, errno)
	}
	if errno := get(uint32(os.Getuid())); errno != 0 {
		t.Errorf("the mount's user reading %s: %v", XattrSync, errno)
	}
	if errno := get(owner); errno != 0 {
		t.Errorf("the owner of the mount's files (--uid) reading %s: %v", XattrSync, errno)
	}
	if errno := get(54321); errno != syscall.EACCES {
		t.Errorf("another user reading %s: %v, want EACCES", XattrSync, errno)
	}
}

// user.strata.control (where `strata refresh` finds the control socket)
// is for the users the socket admits: root and the mount's user.
func TestControlXattr(t *testing.T) {
	const owner = 1234
	f := newTestFSWith(t, map[string]string{"dir/a.txt": "aaa"}, func(o *Options) { o.UID = owner })
	get := func(uid uint32) (string, syscall.Errno) {
		h := &fuse.InHeader{NodeId: rootIno}
		h.Caller.Uid = uid
		buf := make([]byte, 4096)
		n, st := f.raw.GetXAttr(nil, h, XattrControl, buf)
		return string(buf[:n]), syscall.Errno(st)
	}
	if _, errno := get(0); errno != syscall.ENODATA {
		t.Errorf("with no control socket: %v, want ENODATA", errno)
	}
	f.fsys.SetControlDir("/var/cache/strata/x")
	for _, uid := range []uint32{0, uint32(os.Getuid())} {
		if dir, errno := get(uid); errno != 0 || dir != "/var/cache/strata/x" {
			t.Errorf("uid %d: %q %v", uid, dir, errno)
		}
	}
	for _, uid := range []uint32{owner, 54321} {
		if _, errno := get(uid); errno != syscall.EACCES {
			t.Errorf("uid %d: %v, want EACCES", uid, errno)
		}
	}
}
