package writeback

import (
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Content is the committed bytes of one upload: what a file reads as
// from its commit until its upload is complete and the bucket's version
// takes over. The manager is its one owner, found by key (Manager.Content):
// the filesystem asks for it on every read instead of keeping its own
// descriptor, so the end of an upload never leaves a reader with a closed
// or moved file. The descriptor follows the file when the upload moves it
// into the cache, and stays readable while any reader holds it, even after
// the job is gone.
type Content struct {
	f *os.File
	// size and mtime change only for a file written by passthrough, at
	// each of its later closes (Manager.Restage).
	size  atomic.Int64
	mtime atomic.Int64
	refs  atomic.Int32
}

// newContent holds fd (owned from now on) as the content of an upload of
// size bytes.
func newContent(f *os.File, size, mtime int64) *Content {
	c := &Content{f: f}
	c.size.Store(size)
	c.mtime.Store(mtime)
	c.refs.Store(1) // the job's
	return c
}

// dupContent opens a second descriptor on a staging file's: a dup, no
// disk I/O, so it may be taken under the filesystem's node locks.
func dupContent(f *os.File, size, mtime int64) (*Content, error) {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("writeback: dup staging file: %w", err)
	}
	unix.CloseOnExec(fd)
	return newContent(os.NewFile(uintptr(fd), f.Name()), size, mtime), nil
}

// ReadAt reads the committed bytes.
func (c *Content) ReadAt(p []byte, off int64) (int, error) { return c.f.ReadAt(p, off) }

// File is the descriptor, to copy from (a new write session of the file).
func (c *Content) File() *os.File { return c.f }

// Size is the committed file's size.
func (c *Content) Size() int64 { return c.size.Load() }

// MTime is the committed file's modification time (unix nanoseconds).
func (c *Content) MTime() int64 { return c.mtime.Load() }

// Acquire takes a hold on c (nil stays nil: a job whose content is gone).
func (c *Content) Acquire() *Content {
	if c != nil {
		c.refs.Add(1)
	}
	return c
}

// Release drops a reader's hold; the last one closes the descriptor.
func (c *Content) Release() {
	if c != nil && c.refs.Add(-1) == 0 {
		c.f.Close()
	}
}
