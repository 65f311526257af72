package integration

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestListingHasDotAndDotDot: `ls -a` of the mount lists "." and "..",
// each with its directory's inode, as on a local disk; before, a listing
// had neither (file managers take a directory's own entry from it).
func TestListingHasDotAndDotDot(t *testing.T) {
	requireFUSE(t)
	srv := &localSource{t.TempDir()}
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"sub/f.txt": []byte("x")})
	m := startMount(t, srv, srv.source(bucket, ""), "")
	inoOf := func(p string) uint64 {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	sub := filepath.Join(m.dir, "sub")
	for _, c := range []struct {
		dir          string
		self, parent uint64
	}{
		{sub, inoOf(sub), inoOf(m.dir)},
		{m.dir, inoOf(m.dir), 0}, // the kernel shows the mountpoint's parent for the root's ".."
	} {
		ents := dirents(t, c.dir)
		if len(ents) < 2 || ents[0].name != "." || ents[1].name != ".." {
			t.Fatalf("listing of %s: %v, want . and .. first", c.dir, ents)
		}
		if ents[0].ino != c.self || (c.parent != 0 && ents[1].ino != c.parent) {
			t.Errorf("listing of %s: . is inode %d, .. %d; want %d and %d", c.dir, ents[0].ino, ents[1].ino, c.self, c.parent)
		}
	}
	if names, err := os.ReadDir(sub); err != nil || len(names) != 1 || names[0].Name() != "f.txt" {
		t.Errorf("os.ReadDir of %s: %v %v, want f.txt alone", sub, names, err)
	}
}

type dirent struct {
	name string
	ino  uint64
}

// dirents lists dir with getdents64, every entry as the kernel returns it.
func dirents(t *testing.T, dir string) []dirent {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var out []dirent
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 0; {
			d := (*unix.Dirent)(unsafe.Pointer(&b[0]))
			nameb := b[unsafe.Offsetof(d.Name):d.Reclen]
			l := 0
			for l < len(nameb) && nameb[l] != 0 {
				l++
			}
			out = append(out, dirent{name: string(nameb[:l]), ino: d.Ino})
			b = b[d.Reclen:]
		}
	}
}
