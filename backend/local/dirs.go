package local

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/stratafs/strata/backend"
)

// Directories in a tree play the part of an object store's "dir/"
// markers: Put of a marker makes the directory (mkdir), a recursive
// listing carries every empty directory as one (a directory with
// something in it is implied by its keys, as a prefix is), Copy of one
// makes the directory under the new name, and Delete of one removes the
// directory with the empty directories under it, if nothing else is
// there (rmdir). A directory rename copies and deletes what a recursive
// listing returns, then deletes the old name's marker: it moves the empty
// directories too and leaves nothing behind, where the moved keys'
// directories would otherwise stay, empty, as no object store's would.

// copyDir is Copy of the marker src ("d/"): dst ("e/") becomes a
// directory.
func (b *Backend) copyDir(src, dst string) (backend.ObjectInfo, error) {
	sdir, ddir := strings.TrimSuffix(src, "/"), strings.TrimSuffix(dst, "/")
	if validKey(sdir) != nil {
		return backend.ObjectInfo{}, fmt.Errorf("local: copy %q: %w", src, backend.ErrNotExist)
	}
	if !strings.HasSuffix(dst, "/") || validKey(ddir) != nil {
		return backend.ObjectInfo{}, fmt.Errorf("local: copy %q to %q: a directory copies to a directory: %w", src, dst, ErrInvalidKey)
	}
	root, err := b.openRoot("copy")
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	fi, err := root.Stat(sdir)
	root.Close()
	if err != nil {
		return backend.ObjectInfo{}, mapErr("copy", src, err)
	}
	if !fi.IsDir() {
		return backend.ObjectInfo{}, fmt.Errorf("local: copy %q: not a directory: %w", src, backend.ErrNotExist)
	}
	return b.mkdir(ddir)
}

// rmdir is Delete of the marker dir+"/": it removes the empty directories
// under dir, dir's own included, deepest first. Links to directories are
// not followed, and a directory holding anything (a file, an upload's
// temporary file) stays, as a prefix with keys under it does.
func (b *Backend) rmdir(ctx context.Context, dir string) error {
	root, err := b.openRoot("rmdir")
	if err != nil {
		return err
	}
	defer root.Close()
	return pruneDir(ctx, root, dir)
}

func pruneDir(ctx context.Context, root *os.Root, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if fi, err := root.Lstat(dir); err != nil || !fi.IsDir() {
		return nil // gone, a file, or a link: nothing to remove
	}
	d, err := root.Open(dir)
	if err != nil {
		return mapErr("rmdir", dir, err)
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return mapErr("rmdir", dir, err)
	}
	for _, e := range ents {
		if e.Type()&fs.ModeType == fs.ModeDir { // not a link to one
			if err := pruneDir(ctx, root, path.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	_ = root.Remove(dir) // best effort: one that is not empty stays
	return nil
}
