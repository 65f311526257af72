package local

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratafs/strata/backend"
)

// ErrInvalidKey: the key cannot name a file under the root (empty, "." or
// ".." segments, leading or trailing "/", NUL). It wraps
// backend.ErrNotSupported, so callers that only know the backend package
// see an unsupported operation.
var ErrInvalidKey = fmt.Errorf("key is not a valid relative path: %w", backend.ErrNotSupported)

// Options tune a local backend.
type Options struct {
	// ListLimit is the page size when ListOptions.Limit is 0.
	ListLimit int
	// DirCacheEntries is how many sorted listings of large directories are
	// kept so that paging through them does not re-read them per page;
	// negative disables the cache.
	DirCacheEntries int
	// FileMode and DirMode are used for files and directories Put creates.
	FileMode, DirMode os.FileMode
	// NoSync skips the fsyncs of Put and Copy (tests, scratch trees).
	NoSync bool
}

// DefaultOptions returns the options New uses for zero fields.
func DefaultOptions() Options {
	return Options{
		ListLimit:       1000,
		DirCacheEntries: 64,
		FileMode:        0o644,
		DirMode:         0o755,
	}
}

// Backend is a directory tree served as a backend. It implements
// backend.Backend, Checker, Writer, Copier and Deleter.
type Backend struct {
	root  string // absolute, cleaned
	opt   Options
	locks keyLocks
	dirs  *dirCache
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Checker = (*Backend)(nil)
	_ backend.Writer  = (*Backend)(nil)
	_ backend.Copier  = (*Backend)(nil)
	_ backend.Deleter = (*Backend)(nil)
)

// New returns a backend rooted at dir ("/path" or "file:///path"). The
// directory need not exist yet: until it does, Check and List report
// backend.ErrNoBucket.
func New(dir string, opt Options) (*Backend, error) {
	def := DefaultOptions()
	if opt.ListLimit <= 0 {
		opt.ListLimit = def.ListLimit
	}
	switch {
	case opt.DirCacheEntries == 0:
		opt.DirCacheEntries = def.DirCacheEntries
	case opt.DirCacheEntries < 0:
		opt.DirCacheEntries = 0
	}
	if opt.FileMode == 0 {
		opt.FileMode = def.FileMode
	}
	if opt.DirMode == 0 {
		opt.DirMode = def.DirMode
	}
	dir = strings.TrimPrefix(dir, "file://")
	if dir == "" {
		return nil, errors.New("local: empty root directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local: root %q: %w", dir, err)
	}
	return &Backend{root: abs, opt: opt, dirs: newDirCache(opt.DirCacheEntries)}, nil
}

// String returns "file://<root>".
func (b *Backend) String() string { return "file://" + b.root }

// Root returns the absolute root directory.
func (b *Backend) Root() string { return b.root }

// openRoot opens the root directory for one operation. Opening it per
// operation (one openat) keeps a replaced or remounted root from being
// served through a stale descriptor.
func (b *Backend) openRoot(op string) (*os.Root, error) {
	r, err := os.OpenRoot(b.root)
	if err == nil {
		return r, nil
	}
	notDir := false
	if fi, serr := os.Stat(b.root); serr == nil && !fi.IsDir() {
		notDir = true // OpenRoot's error for this matches no errno
	}
	if notDir || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("local: %s: root %s: %w: %w", op, b.root, backend.ErrNoBucket, err)
	}
	return nil, mapErr(op, b.root, err)
}

// Check verifies that the root is a readable directory.
func (b *Backend) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := b.openRoot("check")
	if errors.Is(err, backend.ErrNoBucket) {
		return backend.Explain(fmt.Sprintf("local: %s does not exist or is not a directory", b.root), backend.ErrNoBucket, err)
	}
	if err != nil {
		return err
	}
	defer r.Close()
	d, err := r.Open(".")
	if err != nil {
		return mapErr("check", b.root, err)
	}
	defer d.Close()
	if _, err := d.ReadDir(1); err != nil && !errors.Is(err, io.EOF) {
		return mapErr("check", b.root, err)
	}
	return nil
}

// Stat returns the current version of key.
func (b *Backend) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return backend.ObjectInfo{}, err
	}
	if err := validKey(key); err != nil {
		return backend.ObjectInfo{}, fmt.Errorf("local: stat %q: %w (%w)", key, backend.ErrNotExist, err)
	}
	r, err := b.openRoot("stat")
	if err != nil {
		return backend.ObjectInfo{}, err
	}
	defer r.Close()
	var fi os.FileInfo
	err = retryStale(func() error { fi, err = r.Stat(key); return err })
	if err != nil {
		return backend.ObjectInfo{}, mapErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return backend.ObjectInfo{}, fmt.Errorf("local: stat %q: not a regular file: %w", key, backend.ErrNotExist)
	}
	return objectInfo(key, fi), nil
}

// objectInfo builds the ObjectInfo of a regular file.
func objectInfo(key string, fi os.FileInfo) backend.ObjectInfo {
	return backend.ObjectInfo{Key: key, Size: fi.Size(), MTime: fi.ModTime(), Version: fingerprint(fi)}
}

// fingerprint is a file's Version: size, mtime in ns and inode.
func fingerprint(fi os.FileInfo) string {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%x-%x-%x", fi.Size(), fi.ModTime().UnixNano(), ino)
}

// validKey reports whether key can name a file under the root.
func validKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.IndexByte(key, 0) >= 0 {
		return ErrInvalidKey
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return ErrInvalidKey
		}
	}
	return nil
}

// mapErr wraps a file system error in the backend sentinel it means.
func mapErr(op, key string, err error) error {
	var sentinel error
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP), escapes(err):
		sentinel = backend.ErrNotExist
	case errors.Is(err, fs.ErrPermission):
		sentinel = backend.ErrAccessDenied
	case errors.Is(err, syscall.ESTALE), errors.Is(err, syscall.EIO), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.ENOTCONN), errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.EHOSTUNREACH):
		sentinel = backend.ErrUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("local: %s %q: %w", op, key, err)
	default:
		return fmt.Errorf("local: %s %q: %w", op, key, err)
	}
	return fmt.Errorf("local: %s %q: %w: %w", op, key, sentinel, err)
}

// escapes reports os.Root's refusal of a path (or link) leaving the root.
// The error value is not exported; its text is, and TestSymlinkOutOfRoot
// fails if it changes.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// retryStale runs f again once if it fails with ESTALE (an NFS file handle
// gone stale under a path that may be valid again on lookup).
func retryStale(f func() error) error {
	err := f()
	if errors.Is(err, syscall.ESTALE) {
		time.Sleep(10 * time.Millisecond)
		err = f()
	}
	return err
}

// keyLocks are striped per-key mutexes: two keys rarely share a stripe,
// and memory stays bounded whatever the number of keys.
type keyLocks struct {
	stripes [256]sync.Mutex
}

var lockSeed = maphash.MakeSeed()

func (l *keyLocks) lock(key string) func() {
	m := &l.stripes[maphash.String(lockSeed, key)%uint64(len(l.stripes))]
	m.Lock()
	return m.Unlock
}
