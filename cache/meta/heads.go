package meta

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/stratafs/strata/backend"
)

// Heads: a lookup that is not answered from a listing asks the backend
// about the name. With Options.HeadBytes set, it asks with a GET of the
// object's first bytes (backend.HeadReader) instead of a HEAD, in the
// same round trip: a small file's whole content comes with its metadata,
// and the caller that looked it up (fs, about to open it) takes the bytes
// with TakeHead and caches them, so the open needs no request at all.
// That halves the round trips of a first epoch that opens files by path
// (a sampler over a file list) in directories nobody listed.

// maxHeadBytes bounds the heads held for their callers to take: a lookup
// whose caller does not take its head (a stat) leaves it here until the
// bound drops them all.
const maxHeadBytes = 32 << 20

// heads holds what lookups read of small objects until fs takes it.
type heads struct {
	mu    sync.Mutex
	m     map[string]headData
	bytes int
	// held mirrors len(m), so that the lookups of a warm mount (which
	// find no head) take no lock.
	held atomic.Int32
	// unsupported is set once the backend said it has no ReadHead: the
	// lookups that follow send a HEAD at once.
	unsupported atomic.Bool
}

type headData struct {
	version string
	data    []byte
}

func (h *heads) put(key, version string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes+len(data) > maxHeadBytes {
		clear(h.m)
		h.bytes = 0
	}
	defer func() { h.held.Store(int32(len(h.m))) }()
	if old, ok := h.m[key]; ok {
		h.bytes -= len(old.data)
	}
	h.m[key] = headData{version: version, data: data}
	h.bytes += len(data)
}

// TakeHead returns, once, the whole content of key at version if a lookup
// just read it with its metadata, or nil.
func (c *Cache) TakeHead(key, version string) []byte {
	h := &c.heads
	if h.held.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.m[key]
	if !ok {
		return nil
	}
	delete(h.m, key)
	h.held.Store(int32(len(h.m)))
	h.bytes -= len(d.data)
	if d.version != version {
		return nil
	}
	return d.data
}

// stat answers a probe's question about the object key: a HEAD, or with
// head and HeadBytes a GET of its first bytes whose data, if it is the
// whole object, is kept for TakeHead.
func (c *Cache) stat(ctx context.Context, key string, head bool) (backend.ObjectInfo, error) {
	n := c.opts.HeadBytes
	if !head || n <= 0 || c.heads.unsupported.Load() {
		return c.be.Stat(ctx, key)
	}
	info, data, err := backend.ReadHead(ctx, c.be, key, n)
	if errors.Is(err, backend.ErrNotSupported) {
		c.heads.unsupported.Store(true)
		return c.be.Stat(ctx, key)
	}
	if err == nil && int64(len(data)) == info.Size && info.Size > 0 {
		c.heads.put(key, info.Version, data)
	}
	return info, err
}
