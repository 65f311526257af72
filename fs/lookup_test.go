package fs

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/backend"
)

// The bucket of the lookup and readdir tests: ordinary files and
// directories, a key and a prefix sharing a name, a directory placeholder
// object, and keys that cannot be POSIX names.
var namesBucket = map[string]string{
	"a.txt":                            "aaa",
	"dir/b.txt":                        "bb",
	"dir/sub/c.txt":                    "c",
	"both":                             "file that a prefix shadows",
	"both/inner":                       "i",
	"empty/":                           "", // a console-made folder: the placeholder object only
	"odd//twice":                       "empty segment",
	"odd/./dot":                        "dot segment",
	"odd/../up":                        "dotdot segment",
	"odd/ok":                           "the one good name under odd/",
	"long/" + strings.Repeat("n", 256): "name too long",
	"nul/a\x00b":                       "NUL in a name",
}

func TestLookup(t *testing.T) {
	f := newTestFS(t, namesBucket)
	for _, tc := range []struct {
		path  string
		errno syscall.Errno
		dir   bool
		size  uint64
	}{
		{path: "a.txt", size: 3},
		{path: "dir", dir: true},
		{path: "dir/b.txt", size: 2},
		{path: "dir/sub", dir: true},
		{path: "dir/sub/c.txt", size: 1},
		{path: "both", dir: true}, // a key and a prefix of one name: the directory wins
		{path: "both/inner", size: 1},
		{path: "empty", dir: true},
		{path: "odd", dir: true},
		{path: "odd/ok", size: 28},
		{path: "missing", errno: syscall.ENOENT},
		{path: "dir/missing", errno: syscall.ENOENT},
		{path: "di", errno: syscall.ENOENT}, // a prefix of a name is not a name
	} {
		out, errno := f.lookup(tc.path)
		if errno != tc.errno {
			t.Errorf("lookup %q: errno %v, want %v", tc.path, errno, tc.errno)
			continue
		}
		if errno != 0 {
			continue
		}
		if isDir := out.Attr.Mode&syscall.S_IFMT == syscall.S_IFDIR; isDir != tc.dir {
			t.Errorf("lookup %q: mode %o, directory %v, want %v", tc.path, out.Attr.Mode, isDir, tc.dir)
		}
		if !tc.dir && out.Attr.Size != tc.size {
			t.Errorf("lookup %q: size %d, want %d", tc.path, out.Attr.Size, tc.size)
		}
		if out.NodeId == 0 || out.Attr.Ino == 0 {
			t.Errorf("lookup %q: no inode (%d, %d)", tc.path, out.NodeId, out.Attr.Ino)
		}
	}
}

// TestLookupStableInodes: the same key and version is the same inode on
// every lookup; a file and a directory of the same key never share one.
func TestLookupStableInodes(t *testing.T) {
	f := newTestFS(t, namesBucket)
	a1, _ := f.lookup("dir/b.txt")
	a2, _ := f.lookup("dir/b.txt")
	d, _ := f.lookup("dir")
	if a1.Attr.Ino != a2.Attr.Ino || a1.NodeId != a2.NodeId {
		t.Fatalf("two lookups of one file: inodes %d/%d, nodes %d/%d", a1.Attr.Ino, a2.Attr.Ino, a1.NodeId, a2.NodeId)
	}
	if d.Attr.Ino == a1.Attr.Ino {
		t.Fatal("a directory and a file share an inode number")
	}
}

// TestLookupOddKeysSkipped: a key with an empty, "." or ".." segment or a
// NUL is no name: nothing under it resolves. (The kernel itself never
// asks for "", "." or "..", nor for a name with a NUL: readdir not
// showing them is the other half, in TestReaddir.)
func TestLookupOddKeysSkipped(t *testing.T) {
	f := newTestFS(t, namesBucket)
	for _, p := range []string{"odd/twice", "odd/dot", "odd/up", "up", "nul/a", "nul/b", "long/n"} {
		if out, errno := f.lookup(p); errno != syscall.ENOENT {
			t.Errorf("lookup %q: errno %v (mode %o), want ENOENT", p, errno, out.Attr.Mode)
		}
	}
}

func TestReaddir(t *testing.T) {
	f := newTestFS(t, namesBucket)
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"", []string{"a.txt", "both/", "dir/", "empty/", "long/", "nul/", "odd/"}},
		{"dir", []string{"b.txt", "sub/"}},
		{"dir/sub", []string{"c.txt"}},
		{"both", []string{"inner"}},
		{"empty", nil}, // the placeholder is the directory itself, not a child
		{"odd", []string{"ok"}},
		{"long", nil},
		{"nul", nil},
	} {
		if got := f.readdir(tc.dir); !slices.Equal(got, tc.want) {
			t.Errorf("readdir %q = %q, want %q", tc.dir, got, tc.want)
		}
	}
}

// TestReaddirMatchesLookup: every name readdir shows, lookup finds, with
// the same kind.
func TestReaddirMatchesLookup(t *testing.T) {
	f := newTestFS(t, namesBucket)
	for _, dir := range []string{"", "dir", "odd", "both"} {
		for _, name := range f.readdir(dir) {
			p := strings.TrimSuffix(name, "/")
			if dir != "" {
				p = dir + "/" + p
			}
			out, errno := f.lookup(p)
			if errno != 0 {
				t.Errorf("readdir shows %q, lookup says %v", p, errno)
				continue
			}
			if isDir := out.Attr.Mode&syscall.S_IFMT == syscall.S_IFDIR; isDir != strings.HasSuffix(name, "/") {
				t.Errorf("%q: readdir and lookup disagree on its kind", p)
			}
		}
	}
}

// TestNamesOverMaxLenRefused: a name over 255 bytes is no name (README
// "The namespace"): every call that takes one says ENAMETOOLONG before
// asking the bucket (which fails every request here), even when the
// bucket holds such a key.
func TestNamesOverMaxLenRefused(t *testing.T) {
	f := newTestFS(t, namesBucket)
	f.dirIno("long") // listed while the bucket still answers
	f.be.failWith(backend.ErrUnavailable)
	long := strings.Repeat("n", 256)
	if _, errno := f.lookup("long/" + long); errno != syscall.ENAMETOOLONG {
		t.Errorf("lookup of a key with a 256-byte name: %v, want ENAMETOOLONG", errno)
	}
	if _, errno := f.lookup(long); errno != syscall.ENAMETOOLONG {
		t.Errorf("lookup of a 256-byte name: %v, want ENAMETOOLONG", errno)
	}
	root := fuse.InHeader{NodeId: rootIno}
	calls := map[string]fuse.Status{
		"create": f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Mode: 0o644}, long, &fuse.CreateOut{}),
		"mkdir":  f.raw.Mkdir(nil, &fuse.MkdirIn{InHeader: root, Mode: 0o755}, long, &fuse.EntryOut{}),
		"unlink": f.raw.Unlink(nil, &root, long),
		"rmdir":  f.raw.Rmdir(nil, &root, long),
		"rename": fuse.Status(f.rename("a.txt", long, 0)),
	}
	for op, st := range calls {
		if syscall.Errno(st) != syscall.ENAMETOOLONG {
			t.Errorf("%s of a 256-byte name: %v, want ENAMETOOLONG", op, st)
		}
	}
	// 255 bytes is a name (a fresh mount: the failures above opened the
	// lookup breaker of this one).
	if _, errno := newTestFS(t, namesBucket).lookup(strings.Repeat("m", 255)); errno != syscall.ENOENT {
		t.Errorf("lookup of a missing 255-byte name: %v, want ENOENT", errno)
	}
}

// TestNamesNoKeyCanHold: where keys must be UTF-8 (S3, GCS) and may not
// hold some characters (GCS: carriage return and line feed), creating such
// a name fails at once, without a request (the bucket fails every one
// here): EILSEQ for bytes that are not UTF-8, EINVAL for a character the
// store refuses. A name that is not UTF-8 cannot be in the bucket: its
// lookup and removal are ENOENT.
func TestNamesNoKeyCanHold(t *testing.T) {
	f := newTestFSWith(t, namesBucket, func(o *Options) { o.UTF8Keys, o.KeyForbids = true, "\r\n" })
	f.be.failWith(backend.ErrUnavailable)
	root := fuse.InHeader{NodeId: rootIno}
	for name, want := range map[string]syscall.Errno{"caf\xe9": syscall.EILSEQ, "a\nb": syscall.EINVAL, "cr\r": syscall.EINVAL} {
		if _, errno := f.lookup(name); want == syscall.EILSEQ && errno != syscall.ENOENT {
			t.Errorf("lookup of %q: %v, want ENOENT", name, errno)
		}
		calls := map[string]fuse.Status{
			"create": f.raw.Create(nil, &fuse.CreateIn{InHeader: root, Mode: 0o644}, name, &fuse.CreateOut{}),
			"mkdir":  f.raw.Mkdir(nil, &fuse.MkdirIn{InHeader: root, Mode: 0o755}, name, &fuse.EntryOut{}),
			"rename": fuse.Status(f.rename("a.txt", name, 0)),
		}
		for op, st := range calls {
			if syscall.Errno(st) != want {
				t.Errorf("%s of %q: %v, want %v", op, name, st, want)
			}
		}
		for op, st := range map[string]fuse.Status{"unlink": f.raw.Unlink(nil, &root, name), "rmdir": f.raw.Rmdir(nil, &root, name)} {
			if want == syscall.EILSEQ && syscall.Errno(st) != syscall.ENOENT {
				t.Errorf("%s of %q: %v, want ENOENT", op, name, st)
			}
		}
	}
}
