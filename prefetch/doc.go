// Package prefetch moves bytes from the backend into the block cache: it
// owns every in-flight fetch, the memory budget their buffers come from,
// the scheduling of GETs by priority, and the per-handle detection of
// access patterns that decides what to read ahead.
//
// Each missing block has at most one fetch in flight (single flight): a
// reader needing a block that is already being fetched waits for that
// fetch and copies from its buffer. One fetch (a task) is one ranged GET
// covering one or more consecutive blocks; each block is handed to its
// waiters the moment its bytes arrive, then written to the cache, and only
// then leaves the in-flight table, so a block is always either in flight
// or present (or simply missing), never fetched twice at once.
//
// Priorities: demand reads (a reader is blocked on them) always run, even
// past the concurrency limit and the memory budget; readahead runs within
// both; background warming within half of them. A queued readahead task
// that a reader starts waiting for is promoted to demand.
//
// Memory: every block buffer comes from one Budget. Readahead and warming
// only take buffers when the budget allows, so under pressure the
// prefetch window shrinks instead of memory growing; demand reads never
// fail for lack of budget.
//
// Random fill (fill.go): a handle whose random reads missed 8 blocks has
// the rest of its object fetched in the background, a few GETs at a time.
// Deliver (deliver.go) caches a block whose bytes came another way (a
// lookup's head), within the same single-flight rule.
//
// Close cancels the GETs in flight (an unmount does not wait out their
// timeouts on an endpoint gone silent). An object changed in the bucket
// is logged once per version (changed.go), not once per block.
//
// Lock order: Fetcher.mu (which also guards the fills and deliveries
// running, and the versions found changed), then scheduler.mu, then
// Budget.mu. No lock is held across backend or disk I/O.
package prefetch
