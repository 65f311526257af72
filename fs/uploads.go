package fs

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

// `strata uploads` talks to the mount through extended attributes of any
// of its directories, as `strata sync` does: they reach the mount by its
// mountpoint, from any process that sees it (a Kubernetes pod of the
// sidecar mode included), with no access to the cache dir needed.

// uploadsXattr answers XattrUploads.
func (f *FS) uploadsXattr(dest []byte) (uint32, syscall.Errno) {
	us := []writeback.Upload{}
	if f.wb != nil {
		for _, u := range f.wb.Uploads() {
			if rel, ok := strings.CutPrefix(u.Key, f.prefix); ok {
				u.Key = rel
				us = append(us, u)
			}
		}
	}
	b, err := json.Marshal(us)
	if err != nil {
		return 0, toErrno(err)
	}
	return xattrReply(b, dest)
}

// uploadsRequest carries the retry and discard requests (XattrRetry,
// XattrDiscard set on a directory). Only the mount's own
// user and root may ask: with allow_other, other users see the files but
// must not throw away someone's checkpoint.
func (f *FS) uploadsRequest(ctx context.Context, attr string, data []byte) syscall.Errno {
	if c, ok := fuse.FromContext(ctx); ok && c.Uid != 0 && int(c.Uid) != os.Getuid() {
		return syscall.EPERM
	}
	if f.wb == nil {
		return syscall.EROFS
	}
	rel := strings.Trim(string(data), "/")
	key := f.prefix + rel
	var err error
	if attr == XattrRetry {
		if rel == "" {
			key = ""
		}
		_, err = f.wb.Retry(key)
	} else {
		if rel == "" {
			return syscall.EINVAL
		}
		_, err = f.wb.Discard(ctx, key)
		if err == nil || errors.Is(err, writeback.ErrLandedFirst) {
			f.discarded(key) // the bucket's version: the one before, or what landed
		}
	}
	if err != nil && !errors.Is(err, writeback.ErrNoUpload) && !errors.Is(err, writeback.ErrNotRetryable) {
		f.log.Warn("fs: uploads request failed", "op", attr, "key", key, "err", err)
	}
	return toErrno(err)
}

// discarded: key's pending content is gone; a loaded node of it reads the
// bucket's version from now on, and the kernel forgets what it cached.
func (f *FS) discarded(key string) {
	f.mu.Lock()
	n := f.files[key]
	f.mu.Unlock()
	if n == nil {
		return
	}
	n.mu.Lock()
	writing := n.peekWS().session() != nil
	n.mu.Unlock()
	if writing {
		return
	}
	_, gone := n.refresh(context.Background()) // a new file never uploaded: ENOENT
	_, name := meta.Parent(key)
	parent := n.parentDir()
	go func() { // off the request path, as forgetIfNew
		_ = n.NotifyContent(0, 0) // best effort: the kernel may hold no pages of it
		if gone != nil && parent != nil {
			_ = parent.NotifyEntry(name) // best effort: the kernel may hold no entry
		}
	}()
}
