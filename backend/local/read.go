package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/stratafs/strata/backend"
)

// ReadRange returns n bytes of key from off, from exactly the given version
// ("" for the current one). The version is checked at open and again
// before the last byte is returned (see the package documentation).
func (b *Backend) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("local: read %q: invalid range off %d n %d", key, off, n)
	}
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("local: read %q: %w (%w)", key, backend.ErrNotExist, err)
	}
	f, fi, err := b.openFile(key)
	if err != nil {
		return nil, err
	}
	v := fingerprint(fi)
	if version != "" && v != version {
		f.Close()
		return nil, fmt.Errorf("local: read %q: have %s, want %s: %w", key, v, version, backend.ErrVersionChanged)
	}
	return &rangeReader{ctx: ctx, f: f, key: key, version: v, off: off, end: off + n}, nil
}

// openFile opens key through the root and checks that it is a regular
// file.
func (b *Backend) openFile(key string) (*os.File, os.FileInfo, error) {
	root, err := b.openRoot("read")
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	var f *os.File
	if err := retryStale(func() error { f, err = root.Open(key); return err }); err != nil {
		return nil, nil, mapErr("read", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, mapErr("read", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("local: read %q: not a regular file: %w", key, backend.ErrNotExist)
	}
	return f, fi, nil
}

// rangeReader reads [off, end) of an open file. It withholds the last
// chunk until an fstat shows the file still has the version it had at
// open, so a caller never receives the whole range from a file that
// changed under it.
type rangeReader struct {
	ctx     context.Context
	f       *os.File
	key     string
	version string
	off     int64
	end     int64
	err     error // sticky
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.off >= r.end {
		return 0, io.EOF
	}
	if err := r.ctx.Err(); err != nil {
		r.err = fmt.Errorf("local: read %q: %w", r.key, err)
		return 0, r.err
	}
	if remain := r.end - r.off; int64(len(p)) > remain {
		p = p[:remain]
	}
	last := r.off+int64(len(p)) == r.end
	n, err := r.f.ReadAt(p, r.off)
	if n < len(p) {
		if errors.Is(err, io.EOF) {
			// The file is shorter than the range: changed, or asked past its end.
			if verr := r.check(); verr != nil {
				r.err = verr
			} else {
				r.err = fmt.Errorf("local: read %q: range [%d, %d) ends past the end of the file: %w",
					r.key, r.off+int64(n), r.end, io.ErrUnexpectedEOF)
			}
		} else {
			r.err = mapErr("read", r.key, err)
		}
		return 0, r.err
	}
	if last {
		if err := r.check(); err != nil {
			r.err = err
			return 0, err
		}
	}
	r.off += int64(n)
	return n, nil
}

// check compares the open file's current version with the one at open.
func (r *rangeReader) check() error {
	fi, err := r.f.Stat()
	if err != nil {
		return mapErr("read", r.key, err)
	}
	if v := fingerprint(fi); v != r.version {
		return fmt.Errorf("local: read %q: changed during the read (%s, was %s): %w",
			r.key, v, r.version, backend.ErrVersionChanged)
	}
	return nil
}

func (r *rangeReader) Close() error {
	r.err = errors.New("local: read on a closed reader")
	return r.f.Close()
}
