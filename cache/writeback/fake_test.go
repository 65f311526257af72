package writeback

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratafs/strata/backend"
)

// fakeBucket is an in-memory writable backend with S3-like conditional
// puts, a switch to fail uploads, and a gate to hold them.
type fakeBucket struct {
	mu      sync.Mutex
	objs    map[string][]byte
	vers    map[string]string
	failErr error // returned by Put when set; guarded by mu
	gate    chan struct{}
	puts    atomic.Int64
	// landed, if set, holds the first Put after it has stored its object,
	// whatever its context says: a request whose answer is late, or lost
	// to a cancellation, after the object was in the bucket.
	landed chan struct{}
	stops  []<-chan struct{} // every Put's PutOptions.Stop; guarded by mu
	delErr error             // returned by Delete when set; guarded by mu
	// statHold, by key: a Stat of the key waits until its channel is
	// closed (or its context ends); guarded by mu.
	statHold map[string]chan struct{}
}

func newBucket() *fakeBucket {
	return &fakeBucket{objs: map[string][]byte{}, vers: map[string]string{}}
}

func (b *fakeBucket) String() string { return "fake://bucket" }

func (b *fakeBucket) setFail(err error) {
	b.mu.Lock()
	b.failErr = err
	b.mu.Unlock()
}

func (b *fakeBucket) get(key string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.objs[key]
	return d, ok
}

func (b *fakeBucket) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if hold := b.statHold[key]; hold != nil {
		b.mu.Unlock()
		select {
		case <-hold:
		case <-ctx.Done():
		}
		b.mu.Lock()
		if ctx.Err() != nil {
			return backend.ObjectInfo{}, ctx.Err()
		}
	}
	if b.failErr != nil {
		return backend.ObjectInfo{}, b.failErr
	}
	d, ok := b.objs[key]
	if !ok {
		return backend.ObjectInfo{}, backend.ErrNotExist
	}
	return backend.ObjectInfo{Key: key, Size: int64(len(d)), Version: b.vers[key]}, nil
}

// List lists every key under prefix (the manager lists recursively only).
func (b *fakeBucket) List(ctx context.Context, prefix string, _ backend.ListOptions) (backend.ListPage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var page backend.ListPage
	for k, d := range b.objs {
		if strings.HasPrefix(k, prefix) {
			page.Objects = append(page.Objects, backend.ObjectInfo{Key: k, Size: int64(len(d)), Version: b.vers[k]})
		}
	}
	return page, nil
}

func (b *fakeBucket) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.objs[src]
	if !ok {
		return backend.ObjectInfo{}, backend.ErrNotExist
	}
	if srcVersion != "" && srcVersion != b.vers[src] {
		return backend.ObjectInfo{}, backend.ErrPreconditionFailed
	}
	b.objs[dst], b.vers[dst] = bytes.Clone(d), b.vers[src]
	return backend.ObjectInfo{Key: dst, Size: int64(len(d)), Version: b.vers[dst]}, nil
}

// keys returns the bucket's keys, sorted.
func (b *fakeBucket) keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ks []string
	for k := range b.objs {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (b *fakeBucket) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	d, ok := b.get(key)
	if !ok {
		return nil, backend.ErrNotExist
	}
	return io.NopCloser(bytes.NewReader(d[off : off+n])), nil
}

func (b *fakeBucket) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	b.puts.Add(1)
	b.mu.Lock()
	b.stops = append(b.stops, opt.Stop)
	b.mu.Unlock()
	if b.gate != nil {
		select { // held before it is sent: a stop gives it up
		case <-b.gate:
		case <-ctx.Done():
			return backend.ObjectInfo{}, ctx.Err()
		case <-opt.Stop:
			return backend.ObjectInfo{}, backend.ErrStopped
		}
	}
	b.mu.Lock()
	ferr := b.failErr
	b.mu.Unlock()
	if ferr != nil {
		return backend.ObjectInfo{}, ferr
	}
	data := make([]byte, size)
	if _, err := r.ReadAt(data, 0); err != nil && size > 0 {
		return backend.ObjectInfo{}, err
	}
	if ctx.Err() != nil {
		return backend.ObjectInfo{}, ctx.Err()
	}
	if backend.Stopped(opt.Stop) {
		return backend.ObjectInfo{}, backend.ErrStopped
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur, exists := b.vers[key]
	switch {
	case opt.IfVersion == backend.VersionAbsent && exists,
		opt.IfVersion != "" && opt.IfVersion != backend.VersionAbsent && opt.IfVersion != cur:
		return backend.ObjectInfo{}, backend.ErrPreconditionFailed
	}
	sum := md5.Sum(data)
	v := hex.EncodeToString(sum[:])
	b.objs[key], b.vers[key] = data, v
	if b.landed != nil && b.puts.Load() == 1 {
		b.mu.Unlock()
		<-b.landed
		b.mu.Lock()
	}
	return backend.ObjectInfo{Key: key, Size: size, Version: v}, nil
}

func (b *fakeBucket) setDeleteFail(err error) {
	b.mu.Lock()
	b.delErr = err
	b.mu.Unlock()
}

func (b *fakeBucket) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.delErr != nil {
		return b.delErr
	}
	delete(b.objs, key)
	delete(b.vers, key)
	return nil
}
