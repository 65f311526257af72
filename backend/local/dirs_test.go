package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
)

// TestDirectoryRenameMovesTheTree: the steps of a directory rename (fs,
// writeback: copy and delete what a recursive listing returns, then the
// old name's marker) move a tree's empty directories with it and leave
// nothing under the old name. Before, a recursive listing carried no empty
// directory and nothing removed the ones the moved files left: the new
// name lacked a/empty, and the old one stayed, empty.
func TestDirectoryRenameMovesTheTree(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, err := New(root, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	write(t, root, "a/full/f", []byte("f"))
	write(t, root, "a/full/deep/g", []byte("g"))
	for _, d := range []string{"a/empty", "a/only/empty", "lone"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	objs, complete, err := backend.ListAll(ctx, b, "a/", 0)
	if err != nil || !complete {
		t.Fatalf("list a/: %v (complete %v)", err, complete)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	want := []string{"a/empty/", "a/full/deep/g", "a/full/f", "a/only/empty/"}
	if !slices.Equal(keys, want) {
		t.Fatalf("recursive listing of a/: %q, want %q", keys, want)
	}
	if l, _, _ := backend.ListAll(ctx, b, "lone/", 0); len(l) != 1 || l[0].Key != "lone/" || l[0].Version == "" {
		t.Fatalf("recursive listing of an empty directory: %+v, want its marker", l)
	}
	for _, o := range objs {
		if _, err := b.Copy(ctx, o.Key, o.Version, "b/"+strings.TrimPrefix(o.Key, "a/")); err != nil {
			t.Fatalf("copy %s: %v", o.Key, err)
		}
	}
	for _, o := range objs {
		if err := b.Delete(ctx, o.Key); err != nil {
			t.Fatalf("delete %s: %v", o.Key, err)
		}
	}
	if err := b.Delete(ctx, "a/"); err != nil {
		t.Fatal(err)
	}
	var tree []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != root {
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				rel += "/"
			}
			tree = append(tree, rel)
		}
		return nil
	})
	wantTree := []string{"b/", "b/empty/", "b/full/", "b/full/deep/", "b/full/deep/g", "b/full/f", "b/only/", "b/only/empty/", "lone/"}
	if !slices.Equal(tree, wantTree) {
		t.Fatalf("tree after the rename: %q, want %q", tree, wantTree)
	}
	// A marker copies only from a directory, to a directory.
	if _, err := b.Copy(ctx, "b/full/f/", "", "c/"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("copy of a file as a marker: %v, want ErrNotExist", err)
	}
	if _, err := b.Copy(ctx, "lone/", "", "c"); err == nil {
		t.Fatal("copy of a marker to a file name succeeded")
	}
	// Deleting a marker keeps what is not empty, and follows no link.
	if err := os.Symlink(filepath.Join(root, "lone"), filepath.Join(root, "b", "link")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "b/"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"b/full/f", "b/link", "lone"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s after deleting the marker b/: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "b", "empty")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b/empty after deleting the marker b/: %v, want it gone", err)
	}
}
