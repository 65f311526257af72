package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/stratafs/strata/backend"
)

// copyChunk is how much Put and Copy move between context checks.
const copyChunk = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// Put writes size bytes from r as key: a temporary file in key's directory,
// fsync, then an atomic rename (or link, for VersionAbsent) over the key.
func (b *Backend) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	if dir, ok := strings.CutSuffix(key, "/"); ok && size == 0 && validKey(dir) == nil {
		return b.mkdir(dir)
	}
	if err := validKey(key); err != nil {
		return backend.ObjectInfo{}, fmt.Errorf("local: put %q: %w", key, err)
	}
	if size < 0 {
		return backend.ObjectInfo{}, fmt.Errorf("local: put %q: negative size %d", key, size)
	}
	return b.write(ctx, "put", key, opt.IfVersion, func(tmp *os.File) error {
		// The rename that publishes the object follows at once: a stop
		// counts until the bytes are in.
		cctx, cancel := backend.WithStop(ctx, opt.Stop)
		defer cancel()
		err := copyFromReaderAt(cctx, tmp, r, size)
		if backend.Stopped(opt.Stop) {
			return backend.ErrStopped
		}
		return err
	})
}

// Copy makes dst a copy of src at srcVersion ("" for the current one).
func (b *Backend) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	if strings.HasSuffix(src, "/") {
		return b.copyDir(src, dst) // a marker: dirs.go
	}
	if err := validKey(src); err != nil {
		return backend.ObjectInfo{}, fmt.Errorf("local: copy %q: %w (%w)", src, backend.ErrNotExist, err)
	}
	if err := validKey(dst); err != nil {
		return backend.ObjectInfo{}, fmt.Errorf("local: copy to %q: %w", dst, err)
	}
	sf, fi, err := b.openFile(src)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	defer sf.Close()
	v := fingerprint(fi)
	if srcVersion != "" && v != srcVersion {
		return backend.ObjectInfo{}, fmt.Errorf("local: copy %q: have %s, want %s: %w", src, v, srcVersion, backend.ErrVersionChanged)
	}
	return b.write(ctx, "copy", dst, "", func(tmp *os.File) error {
		for left := fi.Size(); left > 0; {
			if err := ctx.Err(); err != nil {
				return err
			}
			n, err := io.CopyN(tmp, sf, min(left, 64*copyChunk)) // copy_file_range where possible
			left -= n
			if err != nil && !(errors.Is(err, io.EOF) && left == 0) {
				return err
			}
		}
		// No mixed bytes: the source must not have changed during the copy.
		now, err := sf.Stat()
		if err != nil {
			return err
		}
		if fingerprint(now) != v {
			return fmt.Errorf("source %q changed during the copy: %w", src, backend.ErrVersionChanged)
		}
		return nil
	})
}

// write fills a temporary file next to key with fill, makes it durable and
// commits it as key under ifVersion. On any failure the temporary file is
// removed and key is left as it was.
func (b *Backend) write(ctx context.Context, op, key, ifVersion string, fill func(*os.File) error) (backend.ObjectInfo, error) {
	root, err := b.openRoot(op)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	defer root.Close()
	dir := path.Dir(key)
	tmp, tmpName, made, err := b.createTemp(root, key, dir)
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	committed := false
	defer func() {
		if !committed {
			// Failed write: the temp file is discarded, and one that
			// cannot be removed is a .strata-tmp- file List never shows.
			// So are the directories made for it, unless something else
			// is in them by now: a listing would show them as empty
			// directories (markers), where a failed put leaves nothing.
			_ = tmp.Close()
			_ = root.Remove(tmpName)
			for _, d := range slices.Backward(made) {
				_ = root.Remove(d)
			}
		}
	}()
	if err := fill(tmp); err != nil {
		return backend.ObjectInfo{}, mapErr(op, key, err)
	}
	if !b.opt.NoSync {
		if err := tmp.Sync(); err != nil {
			return backend.ObjectInfo{}, mapErr(op, key, err)
		}
	}
	// Rename and link keep inode, size and mtime: this is key's version.
	fi, err := tmp.Stat()
	if err != nil {
		return backend.ObjectInfo{}, mapErr(op, key, err)
	}
	if err := tmp.Close(); err != nil {
		return backend.ObjectInfo{}, mapErr(op, key, err)
	}
	unlock := b.locks.lock(key)
	err = b.commit(ctx, root, tmpName, key, ifVersion)
	unlock()
	if err != nil {
		return backend.ObjectInfo{}, fmt.Errorf("local: %s %q: %w", op, key, err)
	}
	committed = true
	if !b.opt.NoSync {
		if d, err := root.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
			if err != nil {
				return backend.ObjectInfo{}, mapErr(op, key, err)
			}
		}
	}
	return objectInfo(key, fi), nil
}

// createTemp makes dir (if needed) and an exclusive temporary file in it,
// and returns the directories it made, outermost first. A concurrent
// Delete may prune dir between the two steps: try again.
func (b *Backend) createTemp(root *os.Root, key, dir string) (_ *os.File, _ string, made []string, _ error) {
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if dir != "." {
			m, err := b.mkdirAll(root, dir)
			made = append(made, m...)
			if err != nil {
				if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
					return nil, "", made, fmt.Errorf("local: put %q: a parent of the key is a file, which cannot also be a prefix: %w",
						key, backend.ErrNotSupported)
				}
				return nil, "", made, mapErr("put", key, err)
			}
		}
		var rnd [8]byte
		rand.Read(rnd[:])
		name := path.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:]))
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, b.opt.FileMode)
		if err == nil {
			// The mode exactly, not narrowed by the umask (the daemon's is
			// 077, for its cache).
			if err := f.Chmod(b.opt.FileMode); err != nil {
				f.Close()
				_ = root.Remove(name) // best effort: the chmod error is the one to report
				return nil, "", made, mapErr("put", key, err)
			}
			return f, name, made, nil
		}
		last = err
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return nil, "", made, mapErr("put", key, last)
}

// commit moves tmpName to key if key's current version satisfies
// ifVersion. The caller holds key's lock.
func (b *Backend) commit(ctx context.Context, root *os.Root, tmpName, key, ifVersion string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch ifVersion {
	case "":
	case backend.VersionAbsent:
		err := root.Link(tmpName, key)
		switch {
		case err == nil:
			// The object is linked in; a temp name left behind is a
			// .strata-tmp- file List never shows.
			_ = root.Remove(tmpName)
			return nil
		case errors.Is(err, fs.ErrExist):
			return fmt.Errorf("key exists: %w", backend.ErrPreconditionFailed)
		case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EMLINK):
			// No hard links here: check under the lock, then rename.
			if _, err := root.Lstat(key); err == nil {
				return fmt.Errorf("key exists: %w", backend.ErrPreconditionFailed)
			}
		default:
			return err
		}
	default:
		fi, err := root.Stat(key)
		if err != nil {
			if errors.Is(mapErr("", key, err), backend.ErrNotExist) {
				return fmt.Errorf("key does not exist, want version %s: %w", ifVersion, backend.ErrPreconditionFailed)
			}
			return err
		}
		if v := fingerprint(fi); !fi.Mode().IsRegular() || v != ifVersion {
			return fmt.Errorf("current version %s, want %s: %w", v, ifVersion, backend.ErrPreconditionFailed)
		}
	}
	if err := root.Rename(tmpName, key); err != nil {
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("key is a prefix (a directory): %w", backend.ErrNotSupported)
		}
		return err
	}
	return nil
}

// copyFromReaderAt writes size bytes of r to w, checking ctx per chunk.
func copyFromReaderAt(ctx context.Context, w io.Writer, r io.ReaderAt, size int64) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := int(min(int64(len(buf)), size-off))
		n, err := r.ReadAt(buf[:k], off)
		if n < k {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("source ended at byte %d of %d: %w", off+int64(n), size, io.ErrUnexpectedEOF)
			}
			return err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
	}
	return ctx.Err()
}

// Delete removes key and then the parent directories it leaves empty. A
// missing key, or a key naming a directory, is not an error.
func (b *Backend) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dir, ok := strings.CutSuffix(key, "/"); ok && validKey(dir) == nil {
		return b.rmdir(ctx, dir) // dirs.go
	}
	if validKey(key) != nil {
		return nil // no file can have this key
	}
	root, err := b.openRoot("delete")
	if err != nil {
		return err
	}
	defer root.Close()
	unlock := b.locks.lock(key)
	fi, err := root.Lstat(key)
	if err == nil && !fi.IsDir() {
		err = root.Remove(key)
	}
	unlock()
	if err != nil {
		if errors.Is(mapErr("", key, err), backend.ErrNotExist) {
			return nil
		}
		return mapErr("delete", key, err)
	}
	if fi.IsDir() {
		return nil
	}
	// Prune real directories only: a link to a directory is not removed.
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if fi, err := root.Lstat(dir); err != nil || !fi.IsDir() || root.Remove(dir) != nil {
			break // not a plain directory, or not empty
		}
	}
	return nil
}

// A directory marker ("dir/", zero bytes: how object stores keep an empty
// directory) is, in a directory tree, the directory itself.

// mkdir makes dir (and its parents) for a marker put.
func (b *Backend) mkdir(dir string) (backend.ObjectInfo, error) {
	root, err := b.openRoot("mkdir")
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	defer root.Close()
	if _, err := b.mkdirAll(root, dir); err != nil && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, fs.ErrExist) {
		return backend.ObjectInfo{}, mapErr("mkdir", dir, err)
	}
	fi, err := root.Stat(dir)
	if err != nil {
		return backend.ObjectInfo{}, mapErr("mkdir", dir, err)
	}
	if !fi.IsDir() {
		return backend.ObjectInfo{}, fmt.Errorf("local: mkdir %q: a file is in the way: %w", dir, backend.ErrPreconditionFailed)
	}
	return backend.ObjectInfo{Key: dir + "/", MTime: fi.ModTime(), Version: fingerprint(fi)}, nil
}

// mkdirAll makes dir and its missing parents with DirMode exactly (not
// narrowed by the umask); directories already there are left as they are.
// A file in the way is fs.ErrExist or ENOTDIR, as with os.MkdirAll. It
// returns the directories it made, outermost first.
func (b *Backend) mkdirAll(root *os.Root, dir string) (made []string, _ error) {
	p := ""
	for seg := range strings.SplitSeq(dir, "/") {
		p = path.Join(p, seg)
		err := root.Mkdir(p, b.opt.DirMode)
		switch {
		case err == nil:
			made = append(made, p)
			if err := root.Chmod(p, b.opt.DirMode); err != nil {
				return made, err
			}
		case errors.Is(err, fs.ErrExist):
			if fi, serr := root.Stat(p); serr != nil || !fi.IsDir() {
				return made, err
			}
		default:
			return made, err
		}
	}
	return made, nil
}
