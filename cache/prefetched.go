package cache

// Prefetched marks: a block the origin delivered during this run (for a
// read that waited, or ahead of readers: readahead, the whole-object
// fetch at open, directory prefetch) is marked until a reader claims it,
// so that reading it counts as served by fetching rather than as a cache
// hit. A block found in the cache that nobody marked is a hit; so are
// blocks of asked-for warming, which are not marked. Marks live in memory
// only: after a restart (or once an idle object's state is dropped) every
// present block is a hit.
//
// nPrefetched is raised before a bit is set and lowered after it is
// cleared, so it is never below the bits set: zero means none, and the
// read path of a warm object pays one atomic load per block.

// MarkPrefetched marks block i as delivered by the origin in this run and
// not yet read. Call it before the block becomes present.
func (o *Object) MarkPrefetched(i int64) {
	st := o.st
	if i < 0 || i >= st.nblocks {
		return
	}
	st.nPrefetched.Add(1)
	if !st.prefetched.set(i) {
		st.nPrefetched.Add(-1)
	}
}

// TakePrefetched clears block i's mark and reports whether it was set.
func (o *Object) TakePrefetched(i int64) bool {
	st := o.st
	if st.nPrefetched.Load() == 0 || i < 0 || i >= st.nblocks {
		return false
	}
	if st.prefetched.clear(i) {
		st.nPrefetched.Add(-1)
		return true
	}
	return false
}

// TakeAllPrefetched clears every mark of the object and reports whether
// any was set (for an open that the kernel serves without reads).
func (o *Object) TakeAllPrefetched() bool {
	st := o.st
	if st.nPrefetched.Load() == 0 {
		return false
	}
	var n int64
	for w := range st.prefetched.words {
		if old := st.prefetched.words[w].Swap(0); old != 0 {
			for ; old != 0; old &= old - 1 {
				n++
			}
		}
	}
	st.nPrefetched.Add(-n)
	return n > 0
}
