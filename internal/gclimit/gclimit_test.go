package gclimit

import (
	"runtime"
	"testing"
)

const mib = 1 << 20

// TestLimitLeavesHeadroomAboveTheLiveHeap: a mount's floor is 576 MiB
// (256 MiB of fetch buffers and 320 besides). With 500,000 files known the
// live heap was 506 MB: the fixed limit left 70 MB between collections,
// and the runtime collected back to back.
func TestLimitLeavesHeadroomAboveTheLiveHeap(t *testing.T) {
	const floor = 576 * mib
	for _, tc := range []struct{ live, want int64 }{
		{0, floor},
		{300 * mib, floor},               // a busy mount's buffers: the floor holds
		{506 * mib, 506*mib + 253*mib},   // 500,000 files known
		{1000 * mib, 1000*mib + 500*mib}, // a million
		{500 * mib, max(floor, 500*mib+250*mib)},
	} {
		got := LimitFor(floor, tc.live)
		if got != tc.want {
			t.Errorf("LimitFor(%d MiB live) = %d MiB, want %d MiB", tc.live/mib, got/mib, tc.want/mib)
		}
		if got < tc.live+MinHeadroom {
			t.Errorf("LimitFor(%d MiB live) = %d MiB: under %d MiB of headroom", tc.live/mib, got/mib, MinHeadroom/mib)
		}
	}
}

// TestKeeperFollowsTheLiveHeap: the limit rises as the live heap grows,
// falls back to the floor (never under it) when it shrinks, and ignores
// swings of less than a twentieth.
func TestKeeperFollowsTheLiveHeap(t *testing.T) {
	const floor = 576 * mib
	var live, set int64
	var calls int
	k := keeper{floor: floor, set: func(n int64) int64 { calls++; set = n; return 0 }, live: func() int64 { return live }}
	k.apply(floor)
	steps := []struct {
		live, want int64
		applied    bool
	}{
		{100 * mib, floor, false},
		{600 * mib, 900 * mib, true},
		{610 * mib, 900 * mib, false}, // 915 MiB: within a twentieth
		{1200 * mib, 1800 * mib, true},
		{50 * mib, floor, true}, // the kernel forgot the files
	}
	for _, s := range steps {
		live = s.live
		before := calls
		k.step()
		if set != s.want || (calls > before) != s.applied {
			t.Errorf("live %d MiB: limit %d MiB (applied %v), want %d MiB (applied %v)", s.live/mib, set/mib, calls > before, s.want/mib, s.applied)
		}
	}
}

// TestLiveHeapIsRead: the runtime metric the keeper reads exists.
func TestLiveHeapIsRead(t *testing.T) {
	keep := make([]byte, 64*mib)
	runtime.GC()
	if n := liveHeap(); n < 64*mib {
		t.Errorf("live heap %d MiB with 64 MiB held", n/mib)
	}
	runtime.KeepAlive(keep)
}
