package cache

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/index"
)

// A restart must be a warm start. Every block carries a CRC32C, and a
// block found on disk at startup used to be re-read and checked the first
// time the new run served it: the first epoch after a restart paid a
// read of every file before the kernel could be handed it. Now a clean
// shutdown is recorded (after the cache files are synced), and the next
// run trusts the blocks it finds: they were verified or written by the
// run before it and are on disk. The mark is removed as the cache opens,
// so a crash, a kill -9 or a power cut leaves none; that run then checks
// every block as before on first read, and in the background walks the
// whole cache (verifyAll) so that its own clean shutdown may be trusted.

// backgroundVerify starts verifyAll after an unclean shutdown (tests of
// the read path's own checks turn it off).
var backgroundVerify = true

// errGone: the object's entry was evicted before the verifier reached it.
var errGone = errors.New("cache: entry gone")

// verifyAll checks every block of every cached object, one object at a
// time, dropping bad blocks (they are refetched when read).
func (s *Store) verifyAll() {
	defer s.wg.Done()
	start, objects, bad := time.Now(), 0, 0
	var after *index.ID
	for {
		// A page of records at a time: the cache may hold millions.
		var ids []index.ID
		var keys []ObjectKey
		err := s.ix.ScanObjectsPage(after, verifyPage, func(id index.ID, rec index.ObjectRecord, err error) error {
			ids = append(ids, id)
			if err == nil {
				keys = append(keys, ObjectKey{Source: rec.Source, Key: rec.Key, Version: rec.Version, Size: rec.Size, MTime: rec.MTime})
			}
			return nil
		})
		if err != nil {
			s.log.Warn("cache: listing the cache to verify it", "err", err)
			return
		}
		if len(ids) == 0 {
			break
		}
		if after == nil {
			s.log.Info("cache: the last run did not shut down cleanly: verifying the cache in the background (reads verify their blocks meanwhile)")
		}
		after = &ids[len(ids)-1]
		for _, k := range keys {
			select {
			case <-s.stop:
				return
			default:
			}
			o, err := s.acquire(k, true)
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil {
				continue // evicted meanwhile, or unreadable: nothing to trust
			}
			n, err := o.Verify()
			o.Release()
			if err != nil {
				s.log.Warn("cache: verifying", "key", k.Key, "err", err)
				return // not all verified: the next run verifies again
			}
			objects, bad = objects+1, bad+n
		}
	}
	s.verifiedAll.Store(true)
	if objects > 0 {
		s.log.Info("cache: verified", "objects", objects, "bad_blocks_dropped", bad, "took", time.Since(start).Round(time.Millisecond))
	}
}

// verifyPage is how many object records verifyAll reads at a time.
const verifyPage = 1024

// markClean records a clean shutdown if every block is verified: the
// cache files are synced first, so the next run trusts only what is on
// disk.
func (s *Store) markClean() {
	if !s.verifiedAll.Load() {
		return
	}
	d, err := os.Open(s.dir)
	if err == nil {
		err = unix.Syncfs(int(d.Fd()))
		d.Close()
	}
	if err == nil {
		err = s.ix.MarkClean()
	}
	if err != nil {
		s.log.Warn("cache: recording a clean shutdown failed; the next run verifies blocks on first read", "err", err)
	}
}

// Trusted reports whether this run trusts the blocks it found at startup
// (the last run shut down cleanly).
func (s *Store) Trusted() bool { return s.trusted }
