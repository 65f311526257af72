package faults

import (
	"context"
	"fmt"
	"io"

	"github.com/stratafs/strata/backend"
)

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Checker = (*Backend)(nil)
	_ backend.Closer  = (*Backend)(nil)
	_ backend.Writer  = (*Backend)(nil)
	_ backend.Copier  = (*Backend)(nil)
	_ backend.Deleter = (*Backend)(nil)
)

// String is the inner backend's name.
func (b *Backend) String() string { return b.inner.String() }

// Stat is the inner Stat behind the faults of OpStat.
func (b *Backend) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	if _, err := b.before(ctx, Call{Op: OpStat, Key: key}); err != nil {
		return backend.ObjectInfo{}, err
	}
	return b.inner.Stat(ctx, key)
}

// List is the inner List behind the faults of OpList.
func (b *Backend) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	if _, err := b.before(ctx, Call{Op: OpList, Key: prefix, Version: opt.Token}); err != nil {
		return backend.ListPage{}, err
	}
	return b.inner.List(ctx, prefix, opt)
}

// ReadRange is the inner ReadRange behind the faults of OpRead; its body
// may fail part way.
func (b *Backend) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	f, err := b.before(ctx, Call{Op: OpRead, Key: key, Version: version, Off: off, N: n})
	if err != nil {
		return nil, err
	}
	rc, err := b.inner.ReadRange(ctx, key, version, off, n)
	if err != nil || f.BodyErr == nil {
		return rc, err
	}
	return &faultyBody{ReadCloser: rc, b: b, left: max(f.BodyAfter, 0), err: f.BodyErr}, nil
}

// faultyBody passes left bytes through, then fails with err.
type faultyBody struct {
	io.ReadCloser
	b       *Backend
	left    int64
	err     error
	counted bool
}

func (r *faultyBody) Read(p []byte) (int, error) {
	if r.left <= 0 {
		if !r.counted {
			r.counted = true
			if isReset(r.err) {
				r.b.resets.Add(1)
			} else {
				r.b.truncations.Add(1)
			}
		}
		return 0, r.err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	return n, err
}

// Check passes through to the inner Checker (nil if there is none).
func (b *Backend) Check(ctx context.Context) error {
	if _, err := b.before(ctx, Call{Op: OpCheck}); err != nil {
		return err
	}
	if c, ok := b.inner.(backend.Checker); ok {
		return c.Check(ctx)
	}
	return nil
}

// Close passes through to the inner Closer.
func (b *Backend) Close() error {
	if c, ok := b.inner.(backend.Closer); ok {
		return c.Close()
	}
	return nil
}

// Put passes through to the inner Writer; an injected failure happens
// before anything is written.
func (b *Backend) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	w, ok := b.inner.(backend.Writer)
	if !ok {
		return backend.ObjectInfo{}, notSupported("put", b.inner)
	}
	if _, err := b.before(ctx, Call{Op: OpPut, Key: key, Version: opt.IfVersion, N: size}); err != nil {
		return backend.ObjectInfo{}, err
	}
	return w.Put(ctx, key, r, size, opt)
}

// Copy passes through to the inner Copier.
func (b *Backend) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	c, ok := b.inner.(backend.Copier)
	if !ok {
		return backend.ObjectInfo{}, notSupported("copy", b.inner)
	}
	if _, err := b.before(ctx, Call{Op: OpCopy, Key: src, Dst: dst, Version: srcVersion}); err != nil {
		return backend.ObjectInfo{}, err
	}
	return c.Copy(ctx, src, srcVersion, dst)
}

// Delete passes through to the inner Deleter.
func (b *Backend) Delete(ctx context.Context, key string) error {
	d, ok := b.inner.(backend.Deleter)
	if !ok {
		return notSupported("delete", b.inner)
	}
	if _, err := b.before(ctx, Call{Op: OpDelete, Key: key}); err != nil {
		return err
	}
	return d.Delete(ctx, key)
}

func notSupported(op string, inner backend.Backend) error {
	return fmt.Errorf("faults: %s: %s: %w", op, inner, backend.ErrNotSupported)
}
