package gclimit

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// MinHeadroom is the least allocation allowed between collections above
// the floor: below it a collection would come too often to pay for itself.
const MinHeadroom = 128 << 20

// LimitFor is the limit for a live heap of live bytes: the floor, or the
// live heap plus half of it (at least MinHeadroom), whichever is higher.
func LimitFor(floor, live int64) int64 {
	return max(floor, live+max(live/2, MinHeadroom))
}

// Keep sets the limit to floor now, then every interval to LimitFor the
// live heap the last collection found, until ctx ends. A change of less
// than a twentieth is not applied: the limit does not follow every small
// swing of the heap.
func Keep(ctx context.Context, floor int64, every time.Duration) {
	k := keeper{floor: floor, set: debug.SetMemoryLimit, live: liveHeap}
	k.apply(floor)
	go k.run(ctx, every)
}

type keeper struct {
	floor   int64
	current int64
	set     func(int64) int64
	live    func() int64
}

func (k *keeper) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.step()
		}
	}
}

// step applies the limit for the live heap now, if it moved enough.
func (k *keeper) step() {
	want := LimitFor(k.floor, k.live())
	if d := want - k.current; d > k.current/20 || -d > k.current/20 {
		k.apply(want)
	}
}

func (k *keeper) apply(limit int64) {
	k.set(limit)
	k.current = limit
}

// liveHeap is the heap the last collection marked live (0 before one).
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
