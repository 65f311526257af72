package fs

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
)

// Extended attributes Strata answers (in the user namespace, so any user
// can read them):
const (
	// XattrSync on any directory waits for every upload committed so far
	// and returns a JSON writeback.Summary (`strata sync` reads it).
	XattrSync = "user.strata.sync"
	// XattrStatus on a file says where its content stands: "cached",
	// "writing", "uploading" or "failed: <reason>".
	XattrStatus = "user.strata.status"
	// XattrUploads on any directory lists every upload not complete and
	// every write kept aside, as JSON []writeback.Upload with keys relative
	// to the mount (`strata uploads` reads it).
	XattrUploads = "user.strata.uploads"
	// XattrRetry, set on any directory to a path relative to the mount
	// ("" for all), retries its uploads now.
	XattrRetry = "user.strata.retry"
	// XattrDiscard, set on any directory to a path relative to the mount,
	// gives up its uploads (the bytes are kept under failed-writes).
	XattrDiscard = "user.strata.discard"
)

// trackLocal records that n (key) holds local content and shows it in the
// tree until its upload lands.
func (f *FS) trackLocal(n *fileNode, key string, e meta.Entry) {
	f.mu.Lock()
	f.files[key] = n
	sweep := len(f.files) > f.sweepAt
	f.mu.Unlock()
	if sweep { // forget the nodes whose upload is complete
		left := len(f.localUnder(""))
		f.mu.Lock()
		f.sweepAt = max(64, 2*left)
		f.mu.Unlock()
	}
	dir, name := meta.Parent(key)
	f.meta.SetLocal(dir, meta.Entry{Name: name, Size: e.Size, MTime: e.MTime, Version: n.ident, Local: true})
}

// untrack forgets key's local state.
func (f *FS) untrack(key string, n *fileNode) {
	f.mu.Lock()
	if f.files[key] == n {
		delete(f.files, key)
	}
	f.mu.Unlock()
}

var _ gofs.NodeGetxattrer = (*dirNode)(nil)

func (d *dirNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr == XattrUploads {
		return d.fsys.uploadsXattr(dest)
	}
	if attr != XattrSync {
		return 0, syscall.ENODATA
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

var _ gofs.NodeGetxattrer = (*fileNode)(nil)

func (n *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr != XattrStatus {
		return 0, syscall.ENODATA
	}
	key := n.key.get()
	n.mu.Lock()
	writing := n.sess != nil
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
