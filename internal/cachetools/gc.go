package cachetools

import (
	"time"

	"github.com/stratafs/strata/cache"
)

// GCResult is what gc freed.
type GCResult struct {
	FreedBytes int64 `json:"freed_bytes"`
	UsedBytes  int64 `json:"used_bytes"`
	LimitBytes int64 `json:"limit_bytes"`
	Live       bool  `json:"live"`
}

// GC applies the store's size limit now: above 95% of it, the least
// recently used objects go until the cache is under 90%.
func GC(store *cache.Store) GCResult {
	freed := store.EvictNow()
	return GCResult{FreedBytes: freed, UsedBytes: store.Used(), LimitBytes: store.Limit(), Live: true}
}

// SettleEviction waits for the eviction a freshly opened store starts on
// its own (Open kicks it) to finish, instead of racing it with EvictNow.
func SettleEviction(store *cache.Store) GCResult {
	st := store.Stats()
	// The counters start at zero when the store opens; everything evicted
	// since (some of it possibly before this call) is this run's.
	const base = 0
	last, lastChange := st.EvictedBytes.Load(), time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		ev := st.EvictedBytes.Load()
		if ev != last {
			last, lastChange = ev, time.Now()
			continue
		}
		quiet := time.Since(lastChange)
		if quiet >= 300*time.Millisecond && (store.Used() <= store.Limit()/100*95 || quiet > 2*time.Second) {
			break
		}
	}
	return GCResult{FreedBytes: last - base, UsedBytes: store.Used(), LimitBytes: store.Limit()}
}
