package fs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/stratafs/strata/cache/writeback"
)

// Passthrough writes. With --upload async, a file created on the mount is
// written by the kernel straight into its staging file (FUSE passthrough
// covers write(2) since Linux 6.9, with sizes kept right since 6.12): a
// 1 MiB write costs what it costs on the cache disk instead of a round
// trip through the daemon. The daemon then sees no WRITE, so what rests
// on seeing them is kept another way:
//
//   - Publishing: in async mode nothing is uploaded before the file's
//     last close, as for any file. Every close (FLUSH) of a writer
//     journals the file as it stands (durable, held: Manager.RegisterLive,
//     then Restage), so that close() returns with the data safe on disk
//     as the async contract says; the kernel keeps writing into the same
//     file after a close that was not the last, and a restart that finds
//     the file changed since its last acknowledged close keeps it aside.
//   - A failed write: a buffered write into the staging file can fail
//     with ENOSPC (the cache disk full) without the daemon knowing. While
//     such a file is open a watcher reads the disk's free space every
//     ptWatchEvery and grows the file's reservation in the cache (which
//     evicts cached objects to make room); if the free space falls below
//     ptWriteLowWater, the files being written then are not uploaded but
//     kept aside, as a failed write's are, and new files take the
//     userspace path until there is ptWriteMinFree again. A writer killed
//     by a signal is seen at its FLUSH (killedBy); an I/O error of the
//     disk at the fsync of the staging file.
//   - Attributes come from the staging file (fstat), since the kernel
//     asks the daemon for them after each write.
//
// A truncating rewrite of a file nobody has open (open(O_TRUNC), which
// the kernel sends as one OPEN: the mount asks for atomic O_TRUNC) gets a
// new, empty session written the same way (openRewrite). Rewrites in
// place (no O_TRUNC), opens of a file already open, sync mode, a mount
// without passthrough, and a cache disk with less than ptWriteMinFree
// free take the userspace path (session.go, write.go).

const (
	ptWriteMinFree  = 1 << 30   // free space on the cache disk for a new file to be written by passthrough
	ptWriteLowWater = 256 << 20 // below it, files being written by passthrough are kept, not uploaded
	ptWatchEvery    = 10 * time.Millisecond
)

// errDiskNearlyFull is why a file written by passthrough is kept aside.
var errDiskNearlyFull = fmt.Errorf("the cache disk came within %d MiB of full while this file was written (by passthrough, where a failed write does not reach strata), so a write may have failed: %w", ptWriteLowWater>>20, syscall.ENOSPC)

// liveWrite is a node's passthrough write session: the kernel writes the
// session's staging file itself.
type liveWrite struct {
	// mu orders the session's commits (a close's, the last release's):
	// held across their fsync and journal append; nothing else waits on it.
	mu   sync.Mutex
	file *os.File       // our descriptor on the staging file, valid after its commit
	job  *writeback.Job // the live commit, once a close made one (guarded by mu)
	gen  uint64         // ptWriters.lowGen when the session began
	// The latest fsync's upload of a copy of the file, before any close
	// committed it, and the file's stamp as that copy took it (ptsync.go).
	// Guarded by mu.
	synced    fileStamp
	syncedJob *writeback.Job
	// copiedKey and copiedVersion: where a rename put what the latest
	// fsync uploaded (moveSynced: a server-side copy, the session moving
	// along), while the file is still that content. Guarded by mu.
	copiedKey, copiedVersion string
	// failed is the session's first failure (a writer killed, the disk
	// nearly full, a write the kernel did not pass through failing): its
	// file is kept aside, never uploaded. The kernel's own writes never
	// reach the daemon, so they cannot fail the staging file's session.
	failed atomic.Pointer[error]
}

// fail records err as the session's failure unless one came first.
func (lw *liveWrite) fail(err error) { lw.failed.CompareAndSwap(nil, &err) }

// failure is the session's first failure, nil if none.
func (lw *liveWrite) failure() error {
	if p := lw.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// state returns the staged file's size and mtime (stampOf).
func (lw *liveWrite) state() (int64, int64, error) {
	s, err := stampOf(lw.file)
	return s.size, s.mtime, err
}

// ptWriters is the mount's set of passthrough write sessions and the
// watcher of the cache disk's free space while there are any.
type ptWriters struct {
	mu      sync.Mutex // a leaf; guards nodes, running
	nodes   map[*fileNode]struct{}
	running bool
	lowGen  atomic.Uint64 // bumped each time the free space falls below ptWriteLowWater
	low     atomic.Bool   // below ptWriteLowWater, and not yet back above ptWriteMinFree
}

// passthroughWrites reports whether a file created now is written by
// passthrough.
func (f *FS) passthroughWrites() bool {
	if f.wb == nil || !f.passthrough.Load() || f.wb.Mode() != writeback.Async || f.ptw.low.Load() {
		return false
	}
	free, err := f.wb.DiskFree()
	return err == nil && free >= ptWriteMinFree
}

// startLive makes n's new session st a passthrough write session and
// returns the creator's handle, or nil if it cannot (the session stays a
// userspace one). n is not yet visible to others.
func (f *FS) startLive(n *fileNode, st *writeback.Staging) *liveHandle {
	file, err := f.dupStaging(n, st)
	if err != nil {
		return nil
	}
	return f.goLive(n, file)
}

// dupStaging is our descriptor on st for a passthrough write session.
func (f *FS) dupStaging(n *fileNode, st *writeback.Staging) (*os.File, error) {
	file, err := st.Dup()
	if err != nil {
		f.log.Warn("fs: passthrough write: the staging file", "key", n.key.get(), "err", err)
	}
	return file, err
}

// goLive makes n's session, staged in file (dupStaging), a passthrough
// write session and returns the handle of the open that starts it. Caller
// holds n.mu, or n is not yet visible to others.
func (f *FS) goLive(n *fileNode, file *os.File) *liveHandle {
	w := n.ws()
	lw := &liveWrite{file: file, gen: f.ptw.lowGen.Load()}
	w.live, n.ptOpen = lw, 1
	f.ptw.mu.Lock()
	if f.ptw.nodes == nil {
		f.ptw.nodes = map[*fileNode]struct{}{}
	}
	f.ptw.nodes[n] = struct{}{}
	start := !f.ptw.running
	f.ptw.running = true
	f.ptw.mu.Unlock()
	if start {
		go f.watchPassthroughWrites()
	}
	f.stats.PassthroughWriteOpens.Add(1)
	return &liveHandle{fileHandle: &fileHandle{n: n, pt: true, writable: true}, lw: lw}
}

// watchPassthroughWrites runs while any passthrough write session is open.
func (f *FS) watchPassthroughWrites() {
	t := time.NewTicker(ptWatchEvery)
	defer t.Stop()
	for range t.C {
		f.ptw.mu.Lock()
		if len(f.ptw.nodes) == 0 {
			f.ptw.running = false
			f.ptw.mu.Unlock()
			return
		}
		nodes := slices.Collect(maps.Keys(f.ptw.nodes))
		f.ptw.mu.Unlock()
		// The free space first: making room below evicts, which would
		// hide a disk that was full a moment ago.
		f.checkFree()
		for _, n := range nodes {
			n.reserveLive()
		}
	}
}

// checkFree reads the cache disk's free space; false if it is below
// ptWriteLowWater (which ends every open session's chance of upload).
func (f *FS) checkFree() bool {
	free, err := f.wb.DiskFree()
	if err != nil {
		return true
	}
	switch {
	case free < ptWriteLowWater:
		if !f.ptw.low.Swap(true) {
			f.ptw.lowGen.Add(1)
			f.log.Warn("fs: the cache disk is nearly full; files being written by passthrough will be kept, not uploaded, and new files are written through strata", "free_bytes", free)
		}
		return false
	case free >= ptWriteMinFree:
		f.ptw.low.Store(false)
	}
	return true
}

// reserveLive makes the cache account for what the kernel wrote into n's
// staging file so far (evicting cached objects for it), until its commit.
func (n *fileNode) reserveLive() {
	w := n.ws()
	w.sessMu.RLock() // as a write: a commit takes the session's reservation
	defer w.sessMu.RUnlock()
	n.mu.Lock()
	st := w.sess
	n.mu.Unlock()
	if st == nil {
		return
	}
	if size, _, err := st.State(); err == nil {
		_ = st.Reserve(size) // ErrNoSpace: the free-space watch decides
	}
}

// liveHandle is an open of a file in a passthrough write session: the
// kernel reads and writes its staging file.
type liveHandle struct {
	*fileHandle
	lw *liveWrite
}

var _ gofs.FilePassthroughFder = (*liveHandle)(nil)

// PassthroughFd is asked at the creating open only: later opens of the
// inode reuse the kernel's backing file (go-fuse keeps the id).
func (h *liveHandle) PassthroughFd() (int, bool) {
	h.n.fsys.holds.asking(h.n)
	return int(h.lw.file.Fd()), true
}

// openLive opens n, in a passthrough write session, for reading or
// writing; nil if n has none. Caller holds n.mu.
func (n *fileNode) openLiveLocked(writable bool) *liveHandle {
	w := n.peekWS() // every open asks: no write state made for it
	lw := w.liveSession()
	if lw == nil {
		return nil
	}
	n.ptOpen++
	if writable {
		w.writers++
	}
	n.fsys.stats.PassthroughOpens.Add(1)
	return &liveHandle{fileHandle: &fileHandle{n: n, pt: true, writable: writable}, lw: lw}
}

// flushLive is a close of a descriptor of a file written by passthrough.
// Every close journals it as it stands (the async contract: close returns
// with the data safe on disk); none uploads it (the last release does).
// A writer dying of a signal makes the whole file be kept aside: the
// daemon cannot tell what it wrote.
func (n *fileNode) flushLive(ctx context.Context, lw *liveWrite, tid uint32) error {
	// Nothing written since the fsync's upload (write, fsync, close):
	// nothing to publish, whoever closes, so no need to ask who that is.
	// Asking costs up to procReadWait when the closer is a child in
	// execve (its inherited copy, closed on exec), and the close would
	// then land after what the writer does next (a rename).
	if n.unchangedSinceSync(lw) {
		return nil
	}
	if sig := killedBy(tid); sig != 0 {
		err := fmt.Errorf("fs: %s: a process writing the file was killed by signal %d before closing it: %w", n.key.get(), sig, syscall.EIO)
		lw.fail(err)
		return err
	}
	if !n.fsys.checkFree() || n.fsys.ptw.lowGen.Load() != lw.gen {
		lw.fail(errDiskNearlyFull) // close says so; the last release keeps the bytes
		return errDiskNearlyFull
	}
	return n.publishLive(ctx, lw)
}

// truncateLive sets the size of a file written by passthrough: its
// staging file is the kernel's.
func (n *fileNode) truncateLive(lw *liveWrite, size int64) error {
	if err := lw.file.Truncate(size); err != nil {
		err = fmt.Errorf("fs: %s: truncate: %w", n.key.get(), err)
		lw.fail(err)
		return err
	}
	return nil
}

// publishLive journals the file as it stands at a writer's close (or
// fsync): the first time as a live commit, afterwards by Restage.
func (n *fileNode) publishLive(ctx context.Context, lw *liveWrite) error {
	w := n.ws()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	n.mu.Lock()
	current := w.live == lw
	n.mu.Unlock()
	if !current {
		return nil // the last release took over
	}
	if lw.job != nil {
		if err := n.fsys.wb.Restage(ctx, lw.job); err != nil {
			return err
		}
		// The node's entry is what this close committed: a later
		// session's failure goes back to it (abandonLocked).
		if size, mtime, err := lw.state(); err == nil {
			n.mu.Lock()
			n.entry.Size, n.entry.MTime = size, mtime
			e := n.entry
			n.mu.Unlock()
			n.fsys.trackLocal(n, n.key.get(), e)
		}
		return nil
	}
	if s, ok := n.unchangedSinceSyncLocked(lw); ok {
		n.setEntryStamp(s) // nothing new since the fsync's upload
		return nil
	}
	j, err := n.commitSession(ctx, lw)
	if j != nil {
		lw.job = j
	}
	return err
}

// finishLive ends n's passthrough write session at the release of its
// last writer (release has taken lw off the node): what the kernel wrote
// is journaled as it stands and let go for upload, or kept aside if a
// writer was killed or the disk nearly ran full meanwhile.
func (n *fileNode) finishLive(lw *liveWrite) {
	f := n.fsys
	ctx := context.Background()
	defer func() {
		f.ptw.mu.Lock()
		delete(f.ptw.nodes, n)
		f.ptw.mu.Unlock()
		lw.file.Close()
	}()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if !f.checkFree() || f.ptw.lowGen.Load() != lw.gen {
		lw.fail(errDiskNearlyFull)
	}
	key := n.key.get()
	if s, ok := n.unchangedSinceSyncLocked(lw); ok {
		n.endUnchangedSession(s) // the fsync's upload sent all of it
		return
	}
	if lw.job == nil {
		// Not committed by a close (none came, or it failed): as a
		// userspace session's late commit.
		if _, err := n.commitSession(ctx, lw); err != nil && !errors.Is(err, errDiskNearlyFull) {
			f.log.Warn("fs: committing a file written by passthrough", "key", key, "err", err)
		}
		n.unholdName()
		return
	}
	n.mu.Lock()
	werr, unlinked := lw.failure(), n.unlinked
	n.mu.Unlock()
	if unlinked {
		return // its upload was cancelled with the name
	}
	if werr == nil {
		// Journal what a write after the last close changed (a mapping's
		// stores); normally the last close did and this is an fstat.
		if werr = f.wb.Restage(ctx, lw.job); werr == nil {
			n.unholdName()
			return
		}
	}
	n.mu.Lock()
	n.abandonLocked(werr, lw.job.Previous())
	n.mu.Unlock()
	f.wb.KeepLive(lw.job, werr)
	n.forgetIfNew()
}
