package fs

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/writeback"
)

// An fsync of a file written by passthrough uploads a copy of it and waits
// (syncLive). The close that usually follows carries no new data, and
// uploading the file again for it would send every byte twice (issue
// #13: no upload for a FLUSH that carries no new data). The daemon sees
// no write of such a file, so "nothing new" is read from the staging
// file's stamp (size and times) against the one the fsync's copy was
// taken at. That needs timestamps that tell every write apart from the
// last fstat, which writeback.Manager.FineTimestamps checks; where they
// are coarse, or the fsync's upload did not land, or a close committed
// the file since, the close commits and uploads as it always did.

// fileStamp is what fstat says of a staging file's content.
type fileStamp struct{ size, mtime, ctime int64 }

func stampOf(f *os.File) (fileStamp, error) { return stampOfFd(int(f.Fd())) }

func stampOfFd(fd int) (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileStamp{}, fmt.Errorf("fs: stat: %w", err)
	}
	return fileStamp{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, nil
}

// syncLive is an fsync of a file written by passthrough. The kernel goes
// on writing its staging file, so that file cannot be handed over for
// upload: a copy of it is (a reflink where the cache filesystem has
// them), and fsync waits for that upload. After a close of a descriptor
// that was not the last (a dup), the file is already journaled as a held
// upload, and the fsync only makes it durable: its upload waits for the
// last close.
func (n *fileNode) syncLive(ctx context.Context, lw *liveWrite) error {
	w := n.ws()
	f := n.fsys
	lw.mu.Lock()
	n.mu.Lock()
	current, gone := w.live == lw, n.unlinked
	n.mu.Unlock()
	if gone {
		// Its name went: nothing goes up (the key is another file's now),
		// and what the kernel wrote is on the cache disk already.
		lw.mu.Unlock()
		return nil
	}
	if !current || lw.job != nil {
		defer lw.mu.Unlock()
		if !current {
			return nil
		}
		return f.wb.Restage(ctx, lw.job)
	}
	if _, ok := n.unchangedSinceSyncLocked(lw); ok {
		lw.mu.Unlock()
		return nil // the previous fsync's upload holds all of it
	}
	key := n.key.get()
	w.sessMu.RLock()               // as a write: no commit takes the session meanwhile
	stamp, err := stampOf(lw.file) // before the copy: a write during it makes the two differ
	size, mtime := stamp.size, stamp.mtime
	var cp *writeback.Staging
	if err == nil {
		cp, err = f.wb.NewStagingCopy(key, lw.file, size)
	}
	w.sessMu.RUnlock()
	if err != nil {
		lw.mu.Unlock()
		return err
	}
	n.mu.Lock()
	base := n.base
	if v, ok := w.last.Landed(); base == "" && ok {
		base = v
	}
	j, err := f.wb.Register(key, cp, base, mtime, false)
	if err == nil {
		n.base, w.last = "", j // the file's next commit follows this one
		w.own = j
	}
	n.mu.Unlock()
	if err == nil {
		lw.synced, lw.syncedJob = stamp, j
		lw.copiedKey, lw.copiedVersion = "", ""
	}
	lw.mu.Unlock()
	if err != nil {
		cp.Discard()
		return err
	}
	if err := f.wb.Journal(ctx, j); err != nil {
		return err
	}
	return f.wb.WaitJob(ctx, j)
}

// unchangedSinceSyncLocked reports whether lw's file is still what its
// latest fsync uploaded, and no close committed it since: then a close
// has nothing to publish. Caller holds lw.mu.
func (n *fileNode) unchangedSinceSyncLocked(lw *liveWrite) (fileStamp, bool) {
	return n.sameAsSyncedLocked(lw, true)
}

// unchangedSinceSync reports, for a close, whether lw's file is still what
// its latest fsync copied for upload, landed or still uploading (a child's
// close on exec may come while the fsync waits): then the close has
// nothing to publish. If that upload fails, the fsync says so, and the
// last release, which asks for a landed upload (unchangedSinceSyncLocked),
// commits the file as ever.
func (n *fileNode) unchangedSinceSync(lw *liveWrite) bool {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	n.mu.Lock()
	current := n.ws().live == lw
	n.mu.Unlock()
	if !current {
		return false // the last release took over: publishLive says so
	}
	s, ok := n.sameAsSyncedLocked(lw, false)
	if ok {
		n.setEntryStamp(s)
	}
	return ok
}

// sameAsSyncedLocked reports whether lw's file is still what its latest
// fsync copied for upload (landed, if mustLand), and no close committed
// it since; after a rename, whether the rename copied that upload to the
// file's name (moveSynced). Caller holds lw.mu.
func (n *fileNode) sameAsSyncedLocked(lw *liveWrite, mustLand bool) (fileStamp, bool) {
	w := n.ws()
	j := lw.syncedJob
	if lw.job != nil || j == nil {
		return fileStamp{}, false
	}
	if _, landed := j.Landed(); mustLand && !landed {
		return fileStamp{}, false
	}
	n.mu.Lock()
	upload := w.last == j || (w.last == nil && lw.copiedKey == n.key.get())
	same := upload && lw.failure() == nil && !n.unlinked
	n.mu.Unlock()
	if !same || !n.fsys.wb.FineTimestamps() {
		return fileStamp{}, false
	}
	s, err := stampOf(lw.file)
	return s, err == nil && s == lw.synced
}

// setEntryStamp makes n's entry show the file as stamped.
func (n *fileNode) setEntryStamp(s fileStamp) {
	n.mu.Lock()
	n.entry.Size, n.entry.MTime = s.size, s.mtime
	n.mu.Unlock()
}

// endUnchangedSession ends n's passthrough write session at its last
// release with nothing to commit: its fsync's upload sent what it holds.
// Caller holds the session's lw.mu.
func (n *fileNode) endUnchangedSession(s fileStamp) {
	w := n.ws()
	w.sessMu.Lock()
	n.mu.Lock()
	st := w.sess
	w.sess = nil
	w.tids = nil
	n.entry.Size, n.entry.MTime = s.size, s.mtime
	n.mu.Unlock()
	w.sessMu.Unlock()
	if st != nil {
		n.fsys.wb.EndUnchanged(st)
	}
}
