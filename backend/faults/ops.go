package faults

import (
	"context"
	"io"

	"github.com/stratafs/strata/backend"
)

var _ backend.Base = (*Backend)(nil)

// Backend returns the wrapper as the backend to hand to the layers above:
// it implements Checker, Writer, Copier and Deleter exactly where the
// inner backend does, each behind the faults of its Op. *Backend itself
// is only the read side and Close.
func (b *Backend) Backend() backend.Backend {
	return backend.Compose(b, b.inner, backend.Optional{
		Checker: checker{b}, Writer: writer{b}, Copier: copier{b}, Deleter: deleter{b},
	})
}

// The optional interfaces, offered through Backend() only where the inner
// backend has them (so their type assertions below cannot fail).
type (
	checker struct{ b *Backend }
	writer  struct{ b *Backend }
	copier  struct{ b *Backend }
	deleter struct{ b *Backend }
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

// ReadHead is the inner ReadHead behind the faults of OpStat (it answers
// a lookup). Without an inner ReadHead no fault is spent: the caller's
// Stat that follows meets it.
func (b *Backend) ReadHead(ctx context.Context, key string, n int64) (backend.ObjectInfo, []byte, error) {
	if _, ok := b.inner.(backend.HeadReader); !ok {
		return backend.ReadHead(ctx, b.inner, key, n)
	}
	if _, err := b.before(ctx, Call{Op: OpStat, Key: key}); err != nil {
		return backend.ObjectInfo{}, nil, err
	}
	return backend.ReadHead(ctx, b.inner, key, n)
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

// Check is the inner Check behind the faults of OpCheck.
func (c checker) Check(ctx context.Context) error {
	if _, err := c.b.before(ctx, Call{Op: OpCheck}); err != nil {
		return err
	}
	return c.b.inner.(backend.Checker).Check(ctx)
}

// Close passes through to the inner Closer.
func (b *Backend) Close() error {
	if c, ok := b.inner.(backend.Closer); ok {
		return c.Close()
	}
	return nil
}

// Put is the inner Put behind the faults of OpPut; an injected failure
// happens before anything is written.
func (w writer) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	if _, err := w.b.before(ctx, Call{Op: OpPut, Key: key, Version: opt.IfVersion, N: size}); err != nil {
		return backend.ObjectInfo{}, err
	}
	return w.b.inner.(backend.Writer).Put(ctx, key, r, size, opt)
}

// Copy is the inner Copy behind the faults of OpCopy.
func (c copier) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	if _, err := c.b.before(ctx, Call{Op: OpCopy, Key: src, Dst: dst, Version: srcVersion}); err != nil {
		return backend.ObjectInfo{}, err
	}
	return c.b.inner.(backend.Copier).Copy(ctx, src, srcVersion, dst)
}

// Delete is the inner Delete behind the faults of OpDelete.
func (d deleter) Delete(ctx context.Context, key string) error {
	if _, err := d.b.before(ctx, Call{Op: OpDelete, Key: key}); err != nil {
		return err
	}
	return d.b.inner.(backend.Deleter).Delete(ctx, key)
}

// BeginParts passes an eager upload through; the faults of OpPut strike
// its completion (before anything appears), as they strike a Put.
func (w writer) BeginParts(ctx context.Context, key string) (backend.PartUpload, error) {
	pw, ok := w.b.inner.(backend.PartWriter)
	if !ok {
		return nil, backend.ErrNotSupported
	}
	up, err := pw.BeginParts(ctx, key)
	if err != nil {
		return nil, err
	}
	return &faultyParts{PartUpload: up, w: w, key: key}, nil
}

// AbortParts passes through.
func (w writer) AbortParts(ctx context.Context, key, id string) error {
	pw, ok := w.b.inner.(backend.PartWriter)
	if !ok {
		return backend.ErrNotSupported
	}
	return pw.AbortParts(ctx, key, id)
}

type faultyParts struct {
	backend.PartUpload
	w   writer
	key string
}

func (u *faultyParts) Complete(ctx context.Context, tags []string, size int64, opt backend.CompleteOptions) (backend.ObjectInfo, error) {
	if _, err := u.w.b.before(ctx, Call{Op: OpPut, Key: u.key, Version: opt.IfVersion, N: size}); err != nil {
		u.PartUpload.Abort(ctx)
		return backend.ObjectInfo{}, err
	}
	return u.PartUpload.Complete(ctx, tags, size, opt)
}
