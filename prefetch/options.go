package prefetch

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// Options configure a Fetcher.
type Options struct {
	MaxFetches     int           // concurrent GETs (demand may exceed it by half)
	PartBlocks     int64         // blocks per readahead GET
	InitialWindow  int64         // bytes of readahead after the first sequential reads
	MaxWindow      int64         // bytes of readahead at most, per handle
	SmallObject    int64         // objects up to this size are fetched whole at open
	Attempts       int           // tries per block range (each a fresh GET resuming where the last stopped)
	RetryBackoff   time.Duration // first pause between attempts (doubles)
	RequestTimeout time.Duration // bound on one GET, body included
	// ResponseTimeout bounds the wait for a GET's response, the backend's
	// own retries included: a backend that has not answered by then is
	// taken as gone (ErrUnavailable, which opens the breaker), so a read
	// of uncached data fails in seconds rather than after every retry's
	// timeout. The body is then bounded by RequestTimeout.
	ResponseTimeout time.Duration
	// FillMax: objects up to this size that a handle reads at random are
	// fetched whole in the background after a few misses (fill.go); 0
	// turns it off.
	FillMax int64
	Logger  *slog.Logger
}

// DefaultOptions: 64 GETs, 8-block parts, a window from 1 to 64 MiB.
func DefaultOptions() Options {
	return Options{
		MaxFetches: 64, PartBlocks: 8, InitialWindow: 1 << 20, MaxWindow: 64 << 20,
		SmallObject: 4 << 20, Attempts: 4, RetryBackoff: 100 * time.Millisecond,
		RequestTimeout: 5 * time.Minute, ResponseTimeout: 8 * time.Second,
		FillMax: 16 << 30,
	}
}

// Stats are the fetcher's counters.
type Stats struct {
	HitBytes       atomic.Int64 // bytes served from the cache (see PrefetchHitOps)
	MissBytes      atomic.Int64 // bytes served from fetched buffers
	HitOps         atomic.Int64 // reads served entirely from the cache (see PrefetchHitOps)
	MissOps        atomic.Int64 // reads that waited for a fetch
	FetchedBytes   [numPriorities]atomic.Int64
	Fetches        [numPriorities]atomic.Int64
	FetchErrors    atomic.Int64
	Retries        atomic.Int64
	ShrunkWindows  atomic.Int64 // readahead cut short by the memory budget
	UncachedBlocks atomic.Int64 // fetched blocks the cache could not keep
	// WindowBytes sums the readahead window of every sequential top-up
	// and WindowTopUps counts them: their ratio is the mean window.
	WindowBytes  atomic.Int64
	WindowTopUps atomic.Int64
	// Fills counts objects filled whole after random reads (fill.go).
	Fills atomic.Int64

	// Hits are reads served entirely from blocks found in the cache, and
	// opens of fully cached files the kernel reads itself (passthrough: no
	// read reaches strata, so the open counts once, with the file's size
	// as its bytes). A read that waited for a fetch is a miss. Reads, and
	// passthrough opens, that did not wait but were served from blocks
	// the origin delivered during this run ahead of them (readahead, the
	// whole-object fetch at open, directory prefetch, the rest of a block
	// an earlier read waited for) are prefetch hits: neither found in the
	// cache nor waited for. Blocks of asked-for warming (Warm) are hits.
	// Bytes are split the same way.
	PrefetchHitOps   atomic.Int64
	PrefetchHitBytes atomic.Int64
}
