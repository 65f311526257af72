package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// failingReader fails after half of its size.
type failingReader struct{ size int64 }

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size/2 {
		return 0, errors.New("disk on fire")
	}
	return len(p), nil
}

func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	// The walk's callback swallows every error, so WalkDir returns none.
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tmpPrefix) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// must fails the test on an error from its set-up.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFailedWritesLeaveNothing(t *testing.T) {
	root := t.TempDir()
	b, _ := New(root, Options{})
	ctx := context.Background()
	v1, err := b.Put(ctx, "d/k", strings.NewReader("one"), 3, backend.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "d/k", failingReader{4 << 20}, 4<<20, backend.PutOptions{}); err == nil {
		t.Fatal("Put from a failing reader succeeded")
	}
	if _, err := b.Put(ctx, "d/k", strings.NewReader("two"), 3, backend.PutOptions{IfVersion: "stale"}); !errors.Is(err, backend.ErrPreconditionFailed) {
		t.Fatalf("stale Put = %v", err)
	}
	if _, err := b.Put(ctx, "d/k", strings.NewReader("short"), 10, backend.PutOptions{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Put with a reader shorter than size = %v, want io.ErrUnexpectedEOF", err)
	}
	if tmp := tempFiles(t, root); len(tmp) > 0 {
		t.Fatalf("temporary files left behind: %v", tmp)
	}
	if st, err := b.Stat(ctx, "d/k"); err != nil || st.Version != v1.Version {
		t.Fatalf("failed writes changed d/k: %+v, %v", st, err)
	}
}

func TestKeyAndPrefixConflict(t *testing.T) {
	b, _ := New(t.TempDir(), Options{})
	ctx := context.Background()
	for _, k := range []string{"f", "dir/x"} {
		if _, err := b.Put(ctx, k, strings.NewReader("x"), 1, backend.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"f/child", "dir"} {
		_, err := b.Put(ctx, k, strings.NewReader("x"), 1, backend.PutOptions{})
		if !errors.Is(err, backend.ErrNotSupported) {
			t.Errorf("Put(%q) = %v, want ErrNotSupported", k, err)
		}
	}
	if err := b.Delete(ctx, "dir"); err != nil {
		t.Fatalf("Delete of a prefix: %v", err)
	}
	if _, err := b.Stat(ctx, "dir/x"); err != nil {
		t.Fatalf("Delete of the prefix removed its content: %v", err)
	}
}

func TestDeletePrunesOnlyPlainDirectories(t *testing.T) {
	root := t.TempDir()
	b, _ := New(root, Options{})
	ctx := context.Background()
	write(t, root, "real/a/b/k", []byte("x"))
	write(t, root, "real/keep", []byte("x"))
	if err := os.Symlink("real/a", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "link/b/k"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "link")); err != nil {
		t.Fatalf("Delete removed the link it went through: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "real/a/b")); !os.IsNotExist(err) {
		t.Fatalf("emptied real/a/b not pruned: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "real/keep")); err != nil {
		t.Fatalf("non-empty parent removed: %v", err)
	}
}

func TestFingerprint(t *testing.T) {
	root := t.TempDir()
	b, _ := New(root, Options{})
	ctx := context.Background()
	p := write(t, root, "k", []byte("aaaa"))
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(p, old, old))
	v1, err := b.Stat(ctx, "k")
	must(t, err)
	must(t, os.WriteFile(p, []byte("bbbb"), 0o644)) // same size, same inode, new mtime
	v2, err := b.Stat(ctx, "k")
	must(t, err)
	must(t, os.Chtimes(p, old, old)) // mtime put back: the inode still tells? no: same inode
	write(t, root, "k.new", []byte("cccc"))
	must(t, os.Chtimes(p+".new", old, old)) // same size and mtime as v1, new inode
	must(t, os.Rename(p+".new", p))
	v3, err := b.Stat(ctx, "k")
	must(t, err)
	if v1.Version == v2.Version || v1.Version == v3.Version || v2.Version == v3.Version {
		t.Fatalf("versions collide: %s %s %s", v1.Version, v2.Version, v3.Version)
	}
}

func TestLargeDirectoryPaging(t *testing.T) {
	root := t.TempDir()
	const n = 2500
	var want []string
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("big/f%05d", i)
		write(t, root, k, nil)
		want = append(want, k)
	}
	b, _ := New(root, Options{ListLimit: 100})
	// Pretend the directory has been stable for a while.
	b.dirs.now = func() time.Time { return time.Now().Add(time.Hour) }
	ctx := context.Background()
	list := func() []string {
		var got []string
		token := ""
		for {
			p, err := b.List(ctx, "big/", backend.ListOptions{Token: token})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Objects) > 100 {
				t.Fatalf("page of %d objects, Limit 100", len(p.Objects))
			}
			for _, o := range p.Objects {
				got = append(got, o.Key)
			}
			if token = p.Next; token == "" {
				return got
			}
		}
	}
	if got := list(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged listing of %d keys returned %d", n, len(got))
	}
	if b.dirs.ll.Len() != 1 {
		t.Fatalf("listing of a stable large directory not cached (%d entries)", b.dirs.ll.Len())
	}
	// A change to the directory invalidates the cached listing.
	write(t, root, "big/g-new", nil)
	want = append(want, "big/g-new")
	if got := list(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("listing after adding a file: %d keys, want %d (stale cache?)", len(got), len(want))
	}
}

// Files and directories a write creates get FileMode and DirMode exactly,
// whatever the process umask (the daemon runs with 077 to keep its cache
// private, which made every file 0600).
func TestWriteModesIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	root := t.TempDir()
	b, err := New(root, Options{FileMode: 0o640, DirMode: 0o751})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.Put(ctx, "a/b/put", strings.NewReader("x"), 1, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Copy(ctx, "a/b/put", "", "c/copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "m/n/", strings.NewReader(""), 0, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		"a": 0o751, "a/b": 0o751, "a/b/put": 0o640, "c": 0o751, "c/copy": 0o640, "m": 0o751, "m/n": 0o751,
	} {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
}
