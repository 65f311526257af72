package fs

import (
	"context"
	"errors"
	"syscall"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/writeback"
)

// Errors of the filesystem's own (not from a backend or the cache).
var (
	// errNoSuchXattr: a getxattr of an attribute Strata does not answer.
	errNoSuchXattr = errors.New("fs: no such extended attribute")
	// errXattrNotSupported: objects keep no extended attributes, so none
	// can be set or removed. ENOTSUP (not ENODATA) is what cp -p/-a and
	// rsync take as "this filesystem has no xattrs" and carry on.
	errXattrNotSupported = errors.New("fs: extended attributes cannot be stored")
	// errNotMountUser: a question about the whole mount (user.strata.sync)
	// from a user who is not root, the mount's user or its files' owner.
	errNotMountUser = errors.New("fs: only root and the mount's user may ask that")
	// errNameTooLong: a name over meta.MaxNameLen bytes. The kernel's FUSE
	// client passes names up to 1024 bytes, but such a key is not a name
	// in the namespace (a listing skips it), and MinIO refuses it outright.
	errNameTooLong = errors.New("fs: name longer than 255 bytes")
)

// errnoTable is the one place where errors become errnos; the first entry
// an error matches wins.
var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	{backend.ErrNotExist, syscall.ENOENT},
	{backend.ErrVersionChanged, syscall.ESTALE},
	{backend.ErrAccessDenied, syscall.EACCES},
	{backend.ErrPreconditionFailed, syscall.ESTALE}, // the file changed in the bucket since it was opened
	{backend.ErrNotSupported, syscall.ENOTSUP},
	{errNoSuchXattr, syscall.ENODATA},
	{errXattrNotSupported, syscall.ENOTSUP},
	{errNotMountUser, syscall.EACCES},
	{errNameTooLong, syscall.ENAMETOOLONG},
	{cache.ErrNoSpace, syscall.ENOSPC},
	// The uploads requests (user.strata.retry, user.strata.discard):
	// strata uploads tells the user what each means.
	{writeback.ErrNoUpload, syscall.ENOENT},
	{writeback.ErrNotRetryable, syscall.EINVAL},
	{writeback.ErrLandedFirst, syscall.EALREADY},
	{writeback.ErrStillTakingDown, syscall.EBUSY},
	// A backend whose own retries are spent is EIO (README), whatever its
	// last attempt's error wraps: before the context rows, since GCS's
	// "retry deadline reached" wraps context.DeadlineExceeded and a
	// lookup or listing of a silent endpoint came out as ETIMEDOUT.
	{backend.ErrUnavailable, syscall.EIO},
	{context.Canceled, syscall.EINTR},
	{context.DeadlineExceeded, syscall.ETIMEDOUT},
}

// toErrno maps an error to the errno the kernel should see. Anything not
// in the table (a backend that kept failing, a disk error) is EIO.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	for _, e := range errnoTable {
		if errors.Is(err, e.err) {
			return e.errno
		}
	}
	// A local filesystem errno passes through; a network one (a refused
	// connection deep inside a backend error) would only confuse the
	// reader, who gets EIO.
	var errno syscall.Errno
	if errors.As(err, &errno) && passThroughErrnos[errno] {
		return errno
	}
	return syscall.EIO
}

// readErrno is toErrno for a read of an open file: the version the
// handle pinned no longer existing in the bucket (deleted behind the
// mount's back) is ESTALE, as a changed one is; read(2) never gives
// ENOENT.
func readErrno(err error) syscall.Errno {
	if errors.Is(err, backend.ErrNotExist) {
		return syscall.ESTALE
	}
	return toErrno(err)
}

var passThroughErrnos = map[syscall.Errno]bool{
	syscall.ENOSPC: true, syscall.EDQUOT: true, syscall.EROFS: true, syscall.EACCES: true,
	syscall.EPERM: true, syscall.ENOENT: true, syscall.EEXIST: true, syscall.ENOTEMPTY: true,
	syscall.EISDIR: true, syscall.ENOTDIR: true, syscall.EXDEV: true, syscall.ENAMETOOLONG: true,
	syscall.EFBIG: true, syscall.EINVAL: true, syscall.EBADF: true, syscall.EINTR: true,
}
