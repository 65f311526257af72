package fs

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache/writeback"
)

// Extended attributes Strata answers (in the user namespace; the kernel
// lets whoever may read the file ask, and user.strata.sync, which is about
// the whole mount, is further limited to its users: see mountUser). Objects
// have no attributes of their own, so none can be set or removed: both
// are ENOTSUP, which cp -p/-a and rsync take as "this filesystem keeps no
// xattrs" (ENODATA made cp fail to "preserve permissions").
const (
	// XattrSync on any directory waits for every upload committed so far
	// and returns a JSON writeback.Summary (`strata sync` reads it).
	XattrSync = "user.strata.sync"
	// XattrStatus on a file says where its content stands: "cached",
	// "writing", "uploading" or "failed: <reason>".
	XattrStatus = "user.strata.status"
	// XattrControl on any directory is the cache directory whose
	// control.sock the mount serves (`strata refresh` finds it there);
	// absent when the mount serves none. Root and the mount's user only.
	XattrControl = "user.strata.control"
	// XattrUploads on any directory lists every upload not complete and
	// every write kept aside, as JSON []writeback.Upload with keys relative
	// to the mount (`strata uploads` reads it). Same users as XattrSync.
	XattrUploads = "user.strata.uploads"
	// XattrRetry, set on any directory to a path relative to the mount
	// ("" for all), retries its uploads now.
	XattrRetry = "user.strata.retry"
	// XattrDiscard, set on any directory to a path relative to the mount,
	// gives up its uploads (the bytes are kept under failed-writes).
	XattrDiscard = "user.strata.discard"
)

// SetControlDir says where the mount's control socket is (for
// XattrControl).
func (f *FS) SetControlDir(dir string) { f.controlDir.Store(&dir) }

var (
	_ gofs.NodeGetxattrer    = (*dirNode)(nil)
	_ gofs.NodeSetxattrer    = (*dirNode)(nil)
	_ gofs.NodeRemovexattrer = (*dirNode)(nil)
	_ gofs.NodeGetxattrer    = (*fileNode)(nil)
	_ gofs.NodeSetxattrer    = (*fileNode)(nil)
	_ gofs.NodeRemovexattrer = (*fileNode)(nil)
)

func (d *dirNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	switch attr {
	case XattrSync:
	case XattrUploads:
		if !d.fsys.mountUser(ctx, true) {
			return 0, toErrno(errNotMountUser)
		}
		return d.fsys.uploadsXattr(dest)
	case XattrControl:
		dir := d.fsys.controlDir.Load()
		switch {
		case dir == nil:
			return 0, toErrno(errNoSuchXattr)
		case !d.fsys.mountUser(ctx, false):
			return 0, toErrno(errNotMountUser)
		}
		return xattrReply([]byte(*dir), dest)
	default:
		return 0, toErrno(errNoSuchXattr)
	}
	if !d.fsys.mountUser(ctx, true) {
		return 0, toErrno(errNotMountUser)
	}
	var s writeback.Summary
	if wb := d.fsys.wb; wb != nil {
		var err error
		if s, err = wb.WaitAll(ctx); err != nil {
			return 0, toErrno(err)
		}
	}
	b, _ := json.Marshal(s)
	return xattrReply(b, dest)
}

func (d *dirNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if attr == XattrRetry || attr == XattrDiscard {
		return d.fsys.uploadsRequest(ctx, attr, data)
	}
	return toErrno(errXattrNotSupported)
}

func (d *dirNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return toErrno(errXattrNotSupported)
}

func (n *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr != XattrStatus {
		return 0, toErrno(errNoSuchXattr)
	}
	key := n.key.get()
	n.mu.Lock()
	writing := n.peekWS().session() != nil
	n.mu.Unlock()
	status := "cached"
	switch wb := n.fsys.wb; {
	case writing:
		status = "writing"
	case wb != nil && wb.Pending(key):
		status = "uploading"
	}
	if wb := n.fsys.wb; wb != nil {
		for _, fl := range wb.Summary().Failed {
			if fl.Key == key {
				status = "failed: " + strings.ReplaceAll(fl.Error, "\n", " ")
			}
		}
	}
	return xattrReply([]byte(status), dest)
}

func (n *fileNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return toErrno(errXattrNotSupported)
}

func (n *fileNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return toErrno(errXattrNotSupported)
}

// mountUser reports whether the caller may ask about the whole mount
// (every pending upload, the failed ones with their keys and where their
// data is kept, and a wait for all of them): root, the user running the
// mount, and (if owner) the user it shows as the owner of every file
// (--uid). With --allow-other anyone else can read the files the modes
// allow, not that. The control socket admits root and the mount's user.
func (f *FS) mountUser(ctx context.Context, owner bool) bool {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return false
	}
	return c.Uid == 0 || c.Uid == uint32(os.Getuid()) || owner && c.Uid == f.opts.UID
}

// xattrReply answers a getxattr: the size when asked for it, ERANGE when
// the buffer is too small.
func xattrReply(b, dest []byte) (uint32, syscall.Errno) {
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}
