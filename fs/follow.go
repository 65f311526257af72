package fs

import (
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
)

// Appends followed into the backing file of readers opened before.
//
// A reader that opened a fully cached file before a writer did reads it
// through passthrough: the kernel reads its cache file, the cached copy of
// the version it opened, and never asks Strata (shadow.go). `tail -f` of a
// log the job appends to (each line its own open, append, close: a CSV
// logger, `echo ... >> log`) would then see none of the lines: its reads
// end where that version did. So while the writes of a shadow only add
// bytes past the end of that version, each is also written to the cache
// file, past that version's bytes, which it leaves alone: the readers see
// the file grow as on a local disk. A truncation, or a write within the
// version's bytes (a rewrite, torch.save's O_TRUNC), ends that for the
// rest of the shadow: the readers keep the version they opened, plus what
// was appended before. At the end of the shadow the cache file is cut back
// to the version's size and verified (endShadow), as after a writer's
// memory mapping.

// maxFollow bounds what a shadow appends to the readers' cache file: the
// bytes are written twice (the write session holds them too), on the
// cache disk, outside the cache's accounting.
const maxFollow = 256 << 20

// followLocked reports whether a write of k bytes at off, just staged,
// is also for the readers' cache file, and returns a reference to it to
// write there (the caller releases it). Caller holds n.mu.
func (n *fileNode) followLocked(off, k int64) *cache.Object {
	w := n.peekWS()
	if w == nil || !w.shadowed || w.unfollowed || w.shadowObj == nil {
		return nil
	}
	if off < w.shadowOf.Size || w.followBytes+k > maxFollow {
		w.unfollowed = true
		return nil
	}
	w.followed = true
	w.followBytes += k
	return w.shadowObj.Clone()
}

// unfollowLocked ends following for the rest of the shadow: the file no
// longer starts with the version the readers' cache file holds. Caller
// holds n.mu.
func (n *fileNode) unfollowLocked() {
	if w := n.peekWS(); w.isShadowed() {
		w.unfollowed = true
	}
}

// follow writes p at off to obj's file and releases obj. Called with
// sessMu held shared (endShadow waits for it) and no other lock. A failed
// write ends following: the readers then stop where it left them.
func (n *fileNode) follow(obj *cache.Object, p []byte, off int64) {
	defer obj.Release()
	err := pwriteAll(obj, p, off)
	if err == nil {
		return
	}
	n.fsys.log.Warn("fs: an append was not shown to the readers opened before it (the file itself has it)", "key", n.key.get(), "err", err)
	n.mu.Lock()
	n.unfollowLocked()
	n.mu.Unlock()
}

// pwriteAll writes all of p at off to obj's cache file.
func pwriteAll(obj *cache.Object, p []byte, off int64) error {
	fd, err := obj.Fd()
	if err != nil {
		return err
	}
	for len(p) > 0 {
		k, err := unix.Pwrite(fd, p, off)
		if err != nil {
			return fmt.Errorf("pwrite: %w", err)
		}
		if k == 0 {
			return fmt.Errorf("pwrite: %w", io.ErrShortWrite)
		}
		p, off = p[k:], off+int64(k)
	}
	return nil
}

// truncateObjectFile cuts obj's cache file back to size, if longer.
func truncateObjectFile(obj *cache.Object, size int64) error {
	fd, err := obj.Fd()
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if st.Size <= size {
		return nil
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		return fmt.Errorf("ftruncate: %w", err)
	}
	return nil
}
