package cache

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/uring"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC32C the cache records for a block's bytes.
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// errNotCached is returned by ReadAt for a range with missing blocks:
// a caller bug, since callers check HasRange first.
var errNotCached = errors.New("cache: range not cached")

// ReadAt reads len(p) bytes at off from the cache file; every block of the
// range must be present. Blocks not yet verified during this run are
// checked against their CRC first; a bad one is dropped from the cache
// and ErrCorrupt returned so the caller fetches it again. At the end of
// the object it returns fewer bytes and io.EOF.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	st := o.st
	size := st.rec.Size
	if off >= size {
		return 0, io.EOF
	}
	var eof error
	if off+int64(len(p)) > size {
		p = p[:size-off]
		eof = io.EOF
	}
	if len(p) == 0 {
		return 0, eof
	}
	end := off + int64(len(p))
	bs := st.rec.BlockSize
	first, last := off/bs, (end-1)/bs
	if !st.present.hasRange(first, last+1) {
		return 0, errNotCached
	}
	fd, err := st.fd()
	if err != nil {
		return 0, err
	}
	n, err := st.s.eng.ReadAt(fd, p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("cache: read %s: %w", st.rec.Key, err)
	}
	if n < len(p) { // the file lost bytes behind our back
		st.shortRead(fd, first, last)
		return 0, ErrCorrupt
	}
	if !st.present.hasRange(first, last+1) {
		// Dropped since the check above: by this run's first open of a
		// file cut short, which then extended it with holes, or by a
		// concurrent drop. What was read is not the object's.
		return 0, ErrCorrupt
	}
	for i := first; i <= last; i++ {
		if st.verified.has(i) {
			continue
		}
		if err := st.verifyBlock(i, p, off); err != nil {
			return 0, err
		}
	}
	st.s.stats.ReadBytes.Add(int64(n))
	return n, eof
}

var scratch = sync.Pool{New: func() any { return new([]byte) }}

// verifyBlock checks block i, using the bytes already read into p (which
// holds the file from off) when they cover the whole block.
func (st *objectState) verifyBlock(i int64, p []byte, off int64) error {
	start, blen := i*st.rec.BlockSize, st.rec.BlockLen(i)
	var data []byte
	if start >= off && start+blen <= off+int64(len(p)) {
		data = p[start-off : start-off+blen]
	} else {
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		if int64(cap(*bp)) < blen {
			*bp = make([]byte, st.rec.BlockSize)
		}
		data = (*bp)[:blen]
		fd, err := st.fd()
		if err != nil {
			return err
		}
		if n, err := st.s.eng.ReadAt(fd, data, start); int64(n) != blen {
			st.dropBlock(i)
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("cache: verify %s: %w", st.rec.Key, err)
			}
			return ErrCorrupt
		}
	}
	if CRC(data) != st.crcs[i].Load() {
		// Two readers can catch the same bad block at once; the one that
		// drops it reports it, so each bad block counts once.
		if st.dropBlock(i) {
			st.s.log.Warn("cache: block failed CRC check; refetching", "key", st.rec.Key, "block", i)
			st.s.stats.CorruptBlocks.Add(1)
		}
		return ErrCorrupt
	}
	if st.verified.set(i) {
		st.nVerif.Add(1)
	}
	return nil
}

// Verify checks every present block not yet verified during this run
// (nor trusted from a clean shutdown). Bad blocks are dropped; it reports
// how many, with the blocks a missing or short cache file lost since the
// last verify of the object (filecheck.go).
func (o *Object) Verify() (bad int, err error) { return o.verify(false) }

// Reverify checks every present block, verified before or not: what
// `strata cache verify` asks for (bytes flipped on disk after they were
// verified, while the mount was stopped, are found only this way).
func (o *Object) Reverify() (bad int, err error) { return o.verify(true) }

// Distrust forgets that any block of the object was verified: its cache
// file was written behind the cache's back (fs: through a writer's
// mapping of a passthrough backing file), so every block is checked
// again before it is served (a passthrough open verifies the object
// first, a userspace read the block it reads).
func (o *Object) Distrust() {
	st := o.st
	for i := range st.nblocks {
		if st.verified.clear(i) {
			st.nVerif.Add(-1)
		}
	}
}

func (o *Object) verify(all bool) (bad int, err error) {
	st := o.st
	// The file's size first: blocks it cannot hold are lost, not read
	// (as zeros) and found bad one by one.
	if err := o.CheckFile(); err != nil {
		return 0, err
	}
	defer func() { bad += int(st.lost.Swap(0)) }()
	for i := range st.nblocks {
		if !st.present.has(i) || (st.verified.has(i) && !all) {
			continue
		}
		if err := st.verifyBlock(i, nil, 0); errors.Is(err, ErrCorrupt) {
			bad++
		} else if err != nil {
			return bad, err
		}
	}
	return bad, nil
}

// dropBlock forgets block i (index first, then memory). It reports
// whether this call was the one that took the block out.
func (st *objectState) dropBlock(i int64) bool {
	if err := st.s.ix.DropBlocks(st.id, []int64{i}); err != nil {
		st.s.log.Warn("cache: dropping block", "key", st.rec.Key, "block", i, "err", err)
	}
	dropped := st.present.clear(i)
	if dropped {
		st.nPresent.Add(-1)
		st.s.used.Add(-st.rec.BlockLen(i))
	}
	if st.verified.clear(i) {
		st.nVerif.Add(-1)
	}
	return dropped
}

// WriteBlock caches block i. data must be the whole block. A block already
// present (or being written by someone else) is left alone. ErrNoSpace
// means it was not cached; the data is still good to serve.
func (o *Object) WriteBlock(i int64, data []byte) error {
	return o.WriteBlocks(i, [][]byte{data})
}

// WriteBlocks caches consecutive blocks first, first+1, ... in one batch
// of I/O. Each is marked present only after its bytes are written.
func (o *Object) WriteBlocks(first int64, blocks [][]byte) error {
	st := o.st
	s := st.s
	ops := make([]uring.Op, 0, len(blocks))
	idxs := make([]int64, 0, len(blocks))
	var reserved int64
	var fd = -1
	var firstErr error
	for k, data := range blocks {
		i := first + int64(k)
		if i < 0 || i >= st.nblocks || int64(len(data)) != st.rec.BlockLen(i) {
			firstErr = fmt.Errorf("cache: write %s block %d: bad block (%d bytes)", st.rec.Key, i, len(data))
			break
		}
		if st.present.has(i) || !st.claimed.set(i) {
			continue
		}
		if st.present.has(i) { // another writer finished between the checks
			st.claimed.clear(i)
			continue
		}
		if !s.reserve(int64(len(data))) {
			st.claimed.clear(i)
			firstErr = ErrNoSpace
			break
		}
		reserved += int64(len(data))
		if fd < 0 {
			var err error
			if fd, err = st.fd(); err != nil {
				st.claimed.clear(i)
				s.used.Add(-reserved)
				return err
			}
		}
		ops = append(ops, uring.Op{Fd: fd, Off: i * st.rec.BlockSize, Buf: data, Write: true})
		idxs = append(idxs, i)
	}
	if len(ops) > 0 {
		s.eng.Do(ops)
	}
	for k, op := range ops {
		i := idxs[k]
		err := op.Err
		if err == nil {
			crc := CRC(op.Buf)
			if err = s.ix.MarkBlock(st.id, i, index.BlockInfo{CRC: crc, Len: uint32(len(op.Buf))}); err == nil {
				st.crcs[i].Store(crc)
				if st.verified.set(i) {
					st.nVerif.Add(1)
				}
				if st.present.set(i) {
					st.nPresent.Add(1)
				}
				s.stats.WrittenBytes.Add(int64(len(op.Buf)))
			}
		}
		if err != nil {
			s.used.Add(-int64(len(op.Buf)))
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
				s.limits.Refresh()
				s.kickEvict()
				err = ErrNoSpace
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		st.claimed.clear(i)
	}
	if errors.Is(firstErr, ErrNoSpace) {
		s.stats.NoSpace.Add(1)
	}
	return firstErr
}

// reserve accounts n more bytes if the limit allows it.
func (s *Store) reserve(n int64) bool {
	for {
		used := s.used.Load()
		limit := s.limits.Limit(used)
		if used+n > limit {
			s.kickEvict()
			return false
		}
		if s.used.CompareAndSwap(used, used+n) {
			if used+n > limit/100*highWater {
				s.kickEvict()
			}
			return true
		}
	}
}

// markVerified counts every present block as verified in this run (their
// CRCs were just computed from the bytes on disk: Adopt).
func (st *objectState) markVerified() {
	for i := range st.nblocks {
		if st.present.has(i) && st.verified.set(i) {
			st.nVerif.Add(1)
		}
	}
}
