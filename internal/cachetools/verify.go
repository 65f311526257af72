package cachetools

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
)

// VerifyProgress is verify's state, streamed and final.
type VerifyProgress struct {
	Objects     int64    `json:"objects"`
	DoneObjects int64    `json:"done_objects"`
	Bytes       int64    `json:"bytes"`
	DoneBytes   int64    `json:"done_bytes"`
	BadBlocks   int64    `json:"bad_blocks"`
	BadObjects  int64    `json:"bad_objects"`
	Damaged     []string `json:"damaged,omitempty"` // keys with dropped blocks (the first 100)
	Live        bool     `json:"live"`              // done by the running mount
}

// Verify checks the CRC32C of every cached block, those verified
// before too, and drops the bad ones (they are fetched again when next
// read).
func Verify(ctx context.Context, store *cache.Store, workers int, report func(VerifyProgress)) (VerifyProgress, error) {
	type item struct {
		rec   index.ObjectRecord
		bytes int64
	}
	ix := store.Index()
	usage := map[index.ID]int64{}
	if err := ix.ScanBlockUsage(func(id index.ID, _, b int64) error { usage[id] = b; return nil }); err != nil {
		return VerifyProgress{}, err
	}
	var items []item
	var p VerifyProgress
	if err := ix.ScanObjects(func(id index.ID, rec index.ObjectRecord, err error) error {
		if err == nil && usage[id] > 0 {
			items = append(items, item{rec, usage[id]})
			p.Bytes += usage[id]
		}
		return nil
	}); err != nil {
		return p, err
	}
	p.Objects = int64(len(items))
	var doneObjs, doneBytes, badBlocks, badObjs atomic.Int64
	var mu sync.Mutex // guards damaged, firstErr
	var damaged []string
	var firstErr error
	ch := make(chan item)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				r := it.rec
				o, err := store.Acquire(cache.ObjectKey{Source: r.Source, Key: r.Key, Version: r.Version, Size: r.Size, MTime: r.MTime})
				bad := 0
				if err == nil {
					bad, err = o.Reverify()
					o.Release()
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("verify %s: %w", r.Key, err)
				}
				if bad > 0 && len(damaged) < 100 {
					damaged = append(damaged, r.Source+" "+r.Key)
				}
				mu.Unlock()
				if bad > 0 {
					badBlocks.Add(int64(bad))
					badObjs.Add(1)
				}
				doneObjs.Add(1)
				doneBytes.Add(it.bytes)
			}
		}()
	}
	snap := func() VerifyProgress {
		q := p
		q.DoneObjects, q.DoneBytes, q.BadBlocks, q.BadObjects = doneObjs.Load(), doneBytes.Load(), badBlocks.Load(), badObjs.Load()
		return q
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
feed:
	for _, it := range items {
		for {
			select {
			case ch <- it:
				continue feed
			case <-ctx.Done():
				break feed
			case <-tick.C:
				if report != nil {
					report(snap())
				}
			}
		}
	}
	close(ch)
	wg.Wait()
	q := snap()
	q.Damaged = damaged
	if report != nil {
		report(q)
	}
	if ctx.Err() != nil {
		return q, fmt.Errorf("verify interrupted: %w", ctx.Err())
	}
	return q, firstErr
}
