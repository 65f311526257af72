package cache

import "sync/atomic"

// bitmap is a fixed-size set of block indices that readers test without
// locks. Setting and clearing are atomic per bit.
type bitmap struct{ words []atomic.Uint64 }

func newBitmap(n int64) bitmap { return bitmap{words: make([]atomic.Uint64, (n+63)/64)} }

func (b *bitmap) has(i int64) bool {
	w := i >> 6
	if i < 0 || w >= int64(len(b.words)) {
		return false
	}
	return b.words[w].Load()&(1<<(uint(i)&63)) != 0
}

// set reports whether the bit was newly set.
func (b *bitmap) set(i int64) bool {
	mask := uint64(1) << (uint(i) & 63)
	return b.words[i>>6].Or(mask)&mask == 0
}

// clear reports whether the bit was set.
func (b *bitmap) clear(i int64) bool {
	mask := uint64(1) << (uint(i) & 63)
	return b.words[i>>6].And(^mask)&mask != 0
}

// hasRange reports whether every bit in [from, to) is set.
func (b *bitmap) hasRange(from, to int64) bool {
	for i := from; i < to; i++ {
		if !b.has(i) {
			return false
		}
	}
	return true
}
