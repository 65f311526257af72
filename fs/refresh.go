package fs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/meta"
)

// RefreshResult is what a refresh found for one path.
type RefreshResult struct {
	Path string `json:"path"` // relative to the mount's root; "" is the whole mount
	// State is "file", "directory", "gone" (not in the bucket), "local"
	// (written here and not uploaded yet: the local copy stays what the
	// mount shows) or "all" (the whole mount: every listing dropped).
	State   string `json:"state"`
	Size    int64  `json:"size,omitempty"`
	Version string `json:"version,omitempty"`
	// Was is the version the kernel had for the file, when it had one.
	Was string `json:"was,omitempty"`
}

// Refresh makes the mount show p (relative to its root; "" for all of
// it) as the bucket has it now, whatever the metadata TTL: the way out of
// --metadata-ttl indefinite after an object changed in the bucket. The
// cached metadata of p is fetched again (a directory's listings under it
// are dropped, to be fetched on their next use), and the kernel's entries
// for p and under it are invalidated, so the next open looks p up again
// and gets the new version as a new inode. Files open on the old version
// keep it (their uncached reads fail with ESTALE until they are reopened).
func (f *FS) Refresh(ctx context.Context, p string) (RefreshResult, error) {
	rel := strings.Trim(path.Clean("/"+p), "/")
	if rel == "" {
		f.meta.RefreshAll(f.prefix)
		f.forgetBelow(f.root.EmbeddedInode())
		return RefreshResult{State: "all"}, nil
	}
	key := f.prefix + rel
	dir, name := meta.Parent(key)
	res := RefreshResult{Path: rel}
	// The version it replaces, as the mount knew it (the kernel may have
	// forgotten the inode: dentries dropped, memory pressure).
	if old, ok := f.meta.Known(dir, name); ok && !old.Dir {
		res.Was = old.Version
	}
	e, err := f.meta.Refresh(ctx, dir, name)
	switch {
	case errors.Is(err, backend.ErrNotExist):
		res.State = "gone"
	case err != nil:
		return res, fmt.Errorf("refresh %s: %w", rel, err)
	case e.Dir:
		res.State = "directory"
	default:
		res.State, res.Size, res.Version = "file", e.Size, e.Version
	}
	if f.hasLocalContent(key) {
		res.State = "local"
	}
	if parent := f.kernelDir(strings.TrimPrefix(dir, f.prefix)); parent != nil {
		if ch := parent.GetChild(name); ch != nil {
			if n, ok := ch.Operations().(*fileNode); ok {
				n.mu.Lock()
				res.Was = n.versionRead() // what its open files read
				n.mu.Unlock()
			}
			f.forgetBelow(ch)
		}
		f.notifyEntry(parent, name)
	}
	return res, nil
}

// hasLocalContent reports whether key's content is still this mount's
// alone: a write session, or an upload not yet complete. A node tracked
// for key whose upload has landed (the sweep in trackLocal has not
// forgotten it yet) has none.
func (f *FS) hasLocalContent(key string) bool {
	f.mu.Lock()
	n := f.files[key]
	f.mu.Unlock()
	return n != nil && f.hasLocal(n, key)
}

// versionRead is the version n's opens read: its own upload's once that
// has landed (the node takes it at its next open, settleIfUploaded),
// else its entry's. Caller holds n.mu.
func (n *fileNode) versionRead() string {
	w := n.peekWS()
	if v, ok := w.ownJob().Landed(); ok && n.entry.Local && w.session() == nil {
		return v
	}
	return n.entry.Version
}

// kernelDir finds the inode of directory rel ("" or ending in "/") in the
// tree the kernel was given, or nil if the kernel never looked it up.
func (f *FS) kernelDir(rel string) *gofs.Inode {
	in := f.root.EmbeddedInode()
	for _, name := range strings.Split(strings.TrimSuffix(rel, "/"), "/") {
		if name == "" {
			continue
		}
		if in = in.GetChild(name); in == nil {
			return nil
		}
	}
	return in
}

// forgetBelow invalidates the kernel's entries under in, deepest first.
func (f *FS) forgetBelow(in *gofs.Inode) {
	for name, ch := range in.Children() {
		f.forgetBelow(ch)
		f.notifyEntry(in, name)
	}
}

// notifyEntry tells the kernel to drop its entry for name in dir (and so
// look it up again at the next use). The kernel may not know it (ENOENT);
// an unmounted tree (tests) has no kernel to tell (ENOSYS).
func (f *FS) notifyEntry(dir *gofs.Inode, name string) {
	if errno := dir.NotifyEntry(name); errno != 0 && errno != syscall.ENOENT && errno != syscall.ENOSYS {
		f.log.Debug("fs: invalidating a kernel entry", "name", name, "errno", errno)
	}
}

// lookUpStale is what the first read of a version that found it changed
// in the bucket (ESTALE) does before it fails: under a finite TTL it
// refreshes the name, so that the next open reads the bucket's version
// (a new inode) rather than failing on the old one until the TTL has
// passed; under --metadata-ttl indefinite the mount keeps the version it
// knows (the bucket is not asked), as Refresh's doc says. It returns the
// end of the read's log line: what happened, or what the user can do.
func (f *FS) lookUpStale(ctx context.Context, key string) string {
	if f.opts.TTL >= 0 {
		res, err := f.Refresh(ctx, strings.TrimPrefix(key, f.prefix))
		if err == nil {
			return fmt.Sprintf("the name was looked up again (now %s): a new open reads the bucket's version", res.State)
		}
		f.log.Debug("fs: looking a changed file up again", "key", key, "err", err)
	}
	return f.staleHint(key)
}

// staleHint is the end of the log line of a read that failed with ESTALE:
// what the user can do about it.
func (f *FS) staleHint(key string) string {
	mp := "MOUNTPOINT"
	if p := f.mountpoint.Load(); p != nil {
		mp = *p
	}
	cmd := fmt.Sprintf("`strata refresh %s %s`", shellWord(mp), shellWord(strings.TrimPrefix(key, f.prefix)))
	if f.opts.TTL < 0 {
		return "with --metadata-ttl indefinite the mount keeps the version it knows until you run " + cmd + "; then reopen the file"
	}
	return fmt.Sprintf("reopen the file once --metadata-ttl (%s) has passed, or at once after %s", f.opts.TTL.Round(time.Second), cmd)
}

// shellWord quotes s for a shell command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
