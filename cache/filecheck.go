package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// A block the index records is trusted after a clean shutdown without
// being re-read (trust.go), and a fully cached file is handed to the
// kernel, which reads it without asking. Both rest on the cache file
// still holding the block. A file removed or cut short behind the cache's
// back (by hand, a disk tool, a full fsck) used to be re-created, or
// extended, to the object's size by the next open: its lost blocks read
// as zeros, trusted, with no GET and no log line. So the size of the file
// is checked where it costs no read of data: when an object's state is
// loaded (a stat), when this run first opens its file (an fstat before
// sizing it), and before the file is handed to the kernel or counted as
// cached (CheckFile). A missing file holds no block; a short one none
// that ends past its end. Those are forgotten (index, memory, used
// bytes), logged once, and fetched again when read.

// checkPath drops the present blocks the cache file on disk cannot hold.
// load calls it, before the state is shared.
func (st *objectState) checkPath() {
	if st.nPresent.Load() == 0 {
		return
	}
	fi, err := os.Stat(st.s.pathOf(st.id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st.dropPast(-1)
	case err == nil:
		st.dropPast(fi.Size())
	}
	// Another error (EACCES, EIO): the open that reads the file fails
	// and says so; nothing is dropped on a guess.
}

// checkOpen drops the present blocks the open file f cannot hold and
// returns its size. Caller holds st.mu.
func (st *objectState) checkOpen(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("cache: stat file of %s: %w", st.rec.Key, err)
	}
	st.dropPast(fi.Size())
	return fi.Size(), nil
}

// dropPast forgets every present block that does not end within size
// bytes of the cache file (size < 0: the file is missing), the index
// first, and logs it: the blocks are gone when it returns, so no later
// call finds them again (two short reads racing may each log a part).
// Before a file is extended back to the object's size, readers must not
// see it yet: load calls it before the state is shared, fd under st.mu;
// a short read's file is not extended (ReadAt re-checks presence after
// reading, so what it read from a dropped block is not served).
func (st *objectState) dropPast(size int64) {
	if size >= st.rec.Size {
		return
	}
	first := int64(0)
	if size > 0 {
		first = size / st.rec.BlockSize // block first ends past size
	}
	var lost []int64
	var bytes int64
	for i := first; i < st.nblocks; i++ {
		if st.present.has(i) {
			lost = append(lost, i)
			bytes += st.rec.BlockLen(i)
		}
	}
	if len(lost) == 0 {
		return
	}
	s := st.s
	if err := s.ix.DropBlocks(st.id, lost); err != nil {
		// Memory forgets them anyway: the next run finds the file short
		// again and retries.
		s.log.Warn("cache: dropping the blocks of a lost cache file", "key", st.rec.Key, "err", err)
	}
	var n int64
	for _, i := range lost {
		if st.present.clear(i) {
			st.nPresent.Add(-1)
			s.used.Add(-st.rec.BlockLen(i))
			n++
		}
		if st.verified.clear(i) {
			st.nVerif.Add(-1)
		}
	}
	if n == 0 {
		return // a concurrent drop took them
	}
	st.lost.Add(n)
	if size < 0 {
		s.log.Warn("cache: cache file missing; its cached blocks will be fetched again", "key", st.rec.Key, "blocks", n, "bytes", bytes, "file", s.pathOf(st.id))
	} else {
		s.log.Warn("cache: cache file shorter than its cached blocks; they will be fetched again", "key", st.rec.Key, "blocks", n, "bytes", bytes, "file_size", size, "size", st.rec.Size, "file", s.pathOf(st.id))
	}
}

// CheckFile makes sure the cache file still holds the blocks the object
// counts as present, before a caller trusts them wholesale: a passthrough
// open hands the file to the kernel, which would read a file cut short
// short (while stat says the full size), and warm counts present blocks
// as cached. It opens the file if this run has not (an open checks it),
// else fstats the open one; blocks past its end are dropped. No data is
// read.
func (o *Object) CheckFile() error {
	st := o.st
	if st.nPresent.Load() == 0 {
		return nil
	}
	st.mu.Lock()
	f := st.file
	if f == nil {
		st.mu.Unlock()
		_, err := st.fd()
		return err
	}
	// Under st.mu, as an open: closeFile must not close f meanwhile. An
	// fstat reads no data; a drop (an index write) happens once per loss.
	defer st.mu.Unlock()
	_, err := st.checkOpen(f)
	return err
}

// shortRead handles a read of present blocks that came back short: the
// file lost bytes behind the cache's back. Whatever it no longer holds is
// dropped (and logged, once), and the blocks read, whatever the file's
// size says.
func (st *objectState) shortRead(fd int, first, last int64) {
	var sb unix.Stat_t
	if err := unix.Fstat(fd, &sb); err == nil {
		st.dropPast(sb.Size)
	}
	for i := first; i <= last; i++ {
		st.dropBlock(i)
	}
}
