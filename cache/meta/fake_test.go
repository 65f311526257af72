package meta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/backend"
)

// fakeBackend is an in-memory bucket with S3 delimiter semantics, a page
// size, a request counter, an on/off switch and an optional gate that
// holds back pages after the first.
type fakeBackend struct {
	mu       sync.Mutex
	objs     map[string]backend.ObjectInfo
	pageSize int
	down     atomic.Bool
	silent   atomic.Bool // Stat and List wait for their context: an endpoint that never answers
	// stalls: that many Stat and List calls wait for their context, one
	// request the network lost (the ones after it are answered).
	stalls atomic.Int64
	lists  atomic.Int64
	stats  atomic.Int64
	gate   chan struct{} // if set, List of a non-first page waits on it
	// statGate, if set: Stat answers as the bucket was when it was asked,
	// once statGate is closed (an answer on its way while the key changes).
	statGate chan struct{}
	// flat listings (Recursive) only: a non-first page waits on gateFlat
	// if set, and fails if failFlat is set.
	gateFlat chan struct{}
	// firstFlat, if set, holds back the first page of every flat listing.
	firstFlat chan struct{}
	failFlat  atomic.Bool
	flats     atomic.Int64 // Recursive List calls
	// delimited listings only: every one asked for, as prefix@token, in
	// order (calls), and the number of the call (1 for the first) that
	// fails (failAt), with failErr (nil: ErrUnavailable, which opens the
	// cache's breaker).
	calls   []string
	failAt  atomic.Int64
	failErr error
}

func newFake(pageSize int, keys ...string) *fakeBackend {
	f := &fakeBackend{objs: map[string]backend.ObjectInfo{}, pageSize: pageSize}
	for _, k := range keys {
		f.put(k, int64(len(k)), "v1")
	}
	return f
}

func (f *fakeBackend) put(key string, size int64, version string) {
	f.mu.Lock()
	f.objs[key] = backend.ObjectInfo{Key: key, Size: size, Version: version, MTime: time.Unix(1000, 0)}
	f.mu.Unlock()
}

func (f *fakeBackend) del(key string) {
	f.mu.Lock()
	delete(f.objs, key)
	f.mu.Unlock()
}

func (f *fakeBackend) String() string { return "fake://bucket" }

func (f *fakeBackend) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	f.stats.Add(1)
	if f.silent.Load() || f.stalls.Add(-1) >= 0 {
		<-ctx.Done()
		return backend.ObjectInfo{}, ctx.Err()
	}
	if f.down.Load() {
		return backend.ObjectInfo{}, backend.ErrUnavailable
	}
	f.mu.Lock()
	o, ok := f.objs[key]
	gate := f.statGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if ok {
		return o, nil
	}
	return backend.ObjectInfo{}, backend.ErrNotExist
}

func (f *fakeBackend) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	f.lists.Add(1)
	if f.silent.Load() || f.stalls.Add(-1) >= 0 {
		<-ctx.Done()
		return backend.ListPage{}, ctx.Err()
	}
	if f.down.Load() {
		return backend.ListPage{}, backend.ErrUnavailable
	}
	if opt.Recursive {
		f.flats.Add(1)
		if opt.Token == "" && f.firstFlat != nil {
			select {
			case <-f.firstFlat:
			case <-ctx.Done():
				return backend.ListPage{}, ctx.Err()
			}
		}
		if opt.Token != "" && f.gateFlat != nil {
			select {
			case <-f.gateFlat:
			case <-ctx.Done():
				return backend.ListPage{}, ctx.Err()
			}
		}
		if opt.Token != "" && f.failFlat.Load() {
			return backend.ListPage{}, errors.New("fake: flat listing failed")
		}
	} else {
		f.mu.Lock()
		f.calls = append(f.calls, prefix+"@"+opt.Token)
		n, failErr := len(f.calls), f.failErr
		f.mu.Unlock()
		if int64(n) == f.failAt.Load() {
			if failErr == nil {
				failErr = backend.ErrUnavailable
			}
			return backend.ListPage{}, fmt.Errorf("fake: listing call %d failed: %w", n, failErr)
		}
	}
	if opt.Token != "" && f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return backend.ListPage{}, ctx.Err()
		}
	}
	f.mu.Lock()
	var keys []string
	objs := map[string]backend.ObjectInfo{}
	for k, o := range f.objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
			objs[k] = o
		}
	}
	f.mu.Unlock()
	sort.Strings(keys)
	limit := f.pageSize
	if opt.Limit > 0 {
		limit = opt.Limit
	}
	var page backend.ListPage
	n := 0
	last := ""
	for _, k := range keys {
		if k <= opt.Token {
			continue
		}
		entry := k
		isPrefix := false
		if i := strings.IndexByte(k[len(prefix):], '/'); i >= 0 && !opt.Recursive {
			entry = k[:len(prefix)+i+1]
			isPrefix = true
			if entry <= opt.Token || entry+"\xff" == last {
				continue
			}
		}
		if n == limit {
			page.Next = last
			return page, nil
		}
		if isPrefix {
			page.Prefixes = append(page.Prefixes, entry)
			last = entry + "\xff"
		} else {
			page.Objects = append(page.Objects, objs[k])
			last = k
		}
		n++
	}
	return page, nil
}

func (f *fakeBackend) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	return nil, backend.ErrNotSupported
}
