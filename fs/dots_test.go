package fs

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestReaddirListsDotAndDotDot: a directory lists "." (itself) and ".."
// (its parent; the root's is itself) first, as local filesystems do,
// and a seek to an offset the listing handed out resumes after it.
// Before, `ls -a` showed neither, and programs that take a directory's
// own entry from its listing (KDE's file dialogs did) found none.
func TestReaddirListsDotAndDotDot(t *testing.T) {
	f := newTestFS(t, map[string]string{"d/e/f.txt": "x", "d/g.txt": "y", "top.txt": "z"})
	ino := func(path string) uint64 { // the inode number, not go-fuse's node id
		out, errno := f.lookup(path)
		if errno != 0 {
			t.Fatalf("lookup %q: %v", path, errno)
		}
		return out.Attr.Ino
	}
	d, e := ino("d"), ino("d/e")
	for _, c := range []struct {
		path         string
		self, parent uint64
		names        []string
	}{
		{"", rootIno, rootIno, []string{".", "..", "d", "top.txt"}},
		{"d", d, rootIno, []string{".", "..", "e", "g.txt"}},
		{"d/e", e, d, []string{".", "..", "f.txt"}},
	} {
		ents := f.rawDirents(c.path, 0)
		var names []string
		for _, de := range ents {
			names = append(names, de.name)
		}
		if len(names) != len(c.names) || names[0] != "." || names[1] != ".." {
			t.Fatalf("readdir %q: %v, want %v", c.path, names, c.names)
		}
		for i, n := range c.names {
			if names[i] != n {
				t.Fatalf("readdir %q: %v, want %v", c.path, names, c.names)
			}
		}
		if ents[0].ino != c.self || ents[1].ino != c.parent || ents[0].typ != syscall.DT_DIR || ents[1].typ != syscall.DT_DIR {
			t.Errorf("readdir %q: . is inode %d type %d, .. inode %d type %d; want %d and %d, directories", c.path, ents[0].ino, ents[0].typ, ents[1].ino, ents[1].typ, c.self, c.parent)
		}
		// Resume after each entry handed out: the rest follows, once.
		for i := range ents {
			rest := f.rawDirents(c.path, ents[i].off)
			if len(rest) != len(ents)-i-1 || (len(rest) > 0 && rest[0].name != ents[i+1].name) {
				t.Errorf("readdir %q from offset %d (after %q): %d entries, want %d", c.path, ents[i].off, ents[i].name, len(rest), len(ents)-i-1)
			}
		}
	}
}

type rawDirent struct {
	name     string
	ino, off uint64
	typ      uint32
}

// rawDirents lists a directory from offset off, every entry as the kernel
// gets it, "." and ".." included.
func (f *testFS) rawDirents(path string, off uint64) []rawDirent {
	f.t.Helper()
	ino := f.dirIno(path)
	var open fuse.OpenOut
	if st := f.raw.OpenDir(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}}, &open); st != fuse.OK {
		f.t.Fatalf("opendir %q: %v", path, st)
	}
	defer f.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: open.Fh})
	var out []rawDirent
	for {
		buf := make([]byte, 4096)
		in := &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: open.Fh, Offset: off, Size: uint32(len(buf))}
		if st := f.raw.ReadDir(nil, in, fuse.NewDirEntryList(buf, off)); st != fuse.OK {
			f.t.Fatalf("readdir %q: %v", path, st)
		}
		n0 := len(out)
		for b := buf; len(b) >= 24; {
			n := binary.LittleEndian.Uint32(b[16:])
			if n == 0 {
				break
			}
			de := rawDirent{name: string(b[24 : 24+n]), ino: binary.LittleEndian.Uint64(b), off: binary.LittleEndian.Uint64(b[8:]), typ: binary.LittleEndian.Uint32(b[20:])}
			out, off = append(out, de), de.off
			b = b[min(len(b), (24+int(n)+7)&^7):]
		}
		if len(out) == n0 {
			return out
		}
	}
}
