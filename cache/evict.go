package cache

import (
	"cmp"
	"slices"

	"github.com/stratafs/strata/cache/index"
)

// candidate is one object the evictor may remove.
type candidate struct {
	id         index.ID
	lastAccess int64 // unix seconds
	bytes      int64 // bytes its present blocks hold
	blockSize  int64
	pinned     bool // open: never evicted
}

// victim is one eviction decision: the whole object, or (when removing it
// all would free far more than needed) only its last blocks.
type victim struct {
	id         index.ID
	whole      bool
	tailBlocks int64 // when !whole: punch this many of its highest present blocks
	frees      int64
}

// planEviction picks, least recently used first, what to remove so that
// at least need bytes are freed. Pinned objects are skipped. A large
// object that alone would free more than four times what is still needed
// loses only its tail blocks (the start of a file is what a re-reader
// wants first).
func planEviction(cands []candidate, need int64) []victim {
	if need <= 0 {
		return nil
	}
	sorted := slices.Clone(cands)
	slices.SortFunc(sorted, func(a, b candidate) int {
		if c := cmp.Compare(a.lastAccess, b.lastAccess); c != 0 {
			return c
		}
		return cmp.Compare(b.bytes, a.bytes)
	})
	var out []victim
	for _, c := range sorted {
		if need <= 0 {
			break
		}
		if c.pinned || c.bytes <= 0 {
			continue
		}
		if c.blockSize > 0 && c.bytes > 4*need && c.bytes > 4*c.blockSize {
			n := (need + c.blockSize - 1) / c.blockSize
			out = append(out, victim{id: c.id, tailBlocks: n, frees: n * c.blockSize})
			need -= n * c.blockSize
			continue
		}
		out = append(out, victim{id: c.id, whole: true, frees: c.bytes})
		need -= c.bytes
	}
	return out
}
