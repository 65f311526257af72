package prefetch

import (
	"sync"

	"github.com/stratafs/strata/cache/uring"
)

// Budget is the one pool all in-flight block buffers come from. Buffers are
// page-aligned (usable for O_DIRECT) and recycled.
type Budget struct {
	limit     int64
	blockSize int64

	mu   sync.Mutex
	used int64
	free [][]byte
	peak int64
}

// NewBudget returns a budget of limit bytes of blockSize buffers.
func NewBudget(limit, blockSize int64) *Budget {
	return &Budget{limit: max(limit, blockSize), blockSize: blockSize}
}

// TryGet returns a buffer if the budget allows one more.
func (b *Budget) TryGet() ([]byte, bool) {
	b.mu.Lock()
	if b.used+b.blockSize > b.limit {
		b.mu.Unlock()
		return nil, false
	}
	return b.takeLocked(), true
}

// Get returns a buffer even past the limit: demand reads never wait on,
// or fail for, memory.
func (b *Budget) Get() []byte {
	b.mu.Lock()
	return b.takeLocked()
}

func (b *Budget) takeLocked() []byte {
	b.used += b.blockSize
	b.peak = max(b.peak, b.used)
	if n := len(b.free); n > 0 {
		buf := b.free[n-1]
		b.free = b.free[:n-1]
		b.mu.Unlock()
		return buf
	}
	b.mu.Unlock()
	return uring.AllocAligned(int(b.blockSize))
}

// Put returns a buffer. Buffers beyond what the limit can hold are left
// to the garbage collector.
func (b *Budget) Put(buf []byte) {
	if buf == nil {
		return
	}
	b.mu.Lock()
	b.used -= b.blockSize
	if int64(len(b.free)+1)*b.blockSize+b.used <= b.limit {
		b.free = append(b.free, buf[:cap(buf)][:b.blockSize])
	}
	b.mu.Unlock()
}

// InUse is the bytes of buffers handed out now.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes ever handed out at once.
func (b *Budget) Peak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// Limit is the budget in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Free is how many more buffers readahead could take now.
func (b *Budget) Free() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, (b.limit-b.used)/b.blockSize)
}
