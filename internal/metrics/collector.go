package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratafs/strata/prefetch"
)

// A stat is one series read at scrape time.
type stat struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(s *Sources) (float64, bool) // false: source absent, skip
}

func counter(name, help string, labels prometheus.Labels, f func(*Sources) (float64, bool)) stat {
	return stat{prometheus.NewDesc(name, help, nil, labels), prometheus.CounterValue, f}
}

func gauge(name, help string, labels prometheus.Labels, f func(*Sources) (float64, bool)) stat {
	return stat{prometheus.NewDesc(name, help, nil, labels), prometheus.GaugeValue, f}
}

// Helpers that read one kind of source, or report it absent.
func fsStat(f func(s *Sources) int64) func(*Sources) (float64, bool) {
	return func(s *Sources) (float64, bool) {
		if s.FS == nil {
			return 0, false
		}
		return float64(f(s)), true
	}
}

func fetchStat(f func(st *prefetch.Stats) int64) func(*Sources) (float64, bool) {
	return func(s *Sources) (float64, bool) {
		if s.Fetcher == nil {
			return 0, false
		}
		return float64(f(s.Fetcher.Stats())), true
	}
}

func storeStat(f func(s *Sources) int64) func(*Sources) (float64, bool) {
	return func(s *Sources) (float64, bool) {
		if s.Store == nil {
			return 0, false
		}
		return float64(f(s)), true
	}
}

func budgetStat(f func(b *prefetch.Budget) int64) func(*Sources) (float64, bool) {
	return func(s *Sources) (float64, bool) {
		if s.Fetcher == nil {
			return 0, false
		}
		return float64(f(s.Fetcher.Budget())), true
	}
}

// stats lists every scrape-time series.
var stats = buildStats()

func buildStats() []stat {
	out := []stat{
		counter("strata_cache_hits_total", "Reads served entirely from blocks found in the cache, plus opens of fully cached files handed to the kernel (passthrough: the open is the hit, its reads never reach strata).", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.HitOps.Load() })),
		counter("strata_cache_misses_total", "Reads that waited for at least one block from the origin.", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.MissOps.Load() })),
		counter("strata_cache_prefetch_hits_total", "Reads (and passthrough opens) served from blocks prefetched during this run: readahead, the whole-file fetch at open, directory prefetch. Not cache hits.", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.PrefetchHitOps.Load() })),
		counter("strata_cache_hit_bytes_total", "Bytes of the hits (a passthrough open counts its file's size).", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.HitBytes.Load() })),
		counter("strata_cache_miss_bytes_total", "Bytes read from blocks being fetched.", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.MissBytes.Load() })),
		counter("strata_cache_prefetch_hit_bytes_total", "Bytes of the prefetch hits.", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.PrefetchHitBytes.Load() })),
		gauge("strata_cache_used_bytes", "Bytes the cache holds.", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Used() })),
		gauge("strata_cache_limit_bytes", "Bytes the cache may hold now (--cache-size, or what keeps 10% of the disk free).", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Limit() })),
		counter("strata_cache_written_bytes_total", "Block bytes written into the cache.", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Stats().WrittenBytes.Load() })),
		counter("strata_cache_read_bytes_total", "Bytes read from cache files by strata (not counting passthrough).", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Stats().ReadBytes.Load() })),
		counter("strata_cache_evicted_bytes_total", "Bytes evicted to stay under the limit.", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Stats().EvictedBytes.Load() })),
		counter("strata_cache_evicted_objects_total", "Objects evicted whole.", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Stats().EvictedObjs.Load() })),
		counter("strata_cache_corrupt_blocks_total", "Cached blocks that failed their CRC32C check and were dropped.", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Stats().CorruptBlocks.Load() })),
		counter("strata_cache_no_space_total", "Block writes refused because the cache or its disk was full.", nil,
			storeStat(func(s *Sources) int64 { return s.Store.Stats().NoSpace.Load() })),

		counter("strata_fs_lookups_total", "Name lookups.", nil, fsStat(func(s *Sources) int64 { return s.FS.Stats().Lookups.Load() })),
		counter("strata_fs_opens_total", "File opens.", nil, fsStat(func(s *Sources) int64 { return s.FS.Stats().Opens.Load() })),
		counter("strata_fs_passthrough_opens_total", "File opens handed to the kernel (FUSE passthrough).", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().PassthroughOpens.Load() })),
		counter("strata_fs_userspace_opens_total", "File opens served in userspace (every READ of them goes through strata).", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().UserspaceOpens.Load() })),
		counter("strata_fs_reads_total", "FUSE READ requests strata answered (reads of passthrough opens never reach it).", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().Reads.Load() })),
		counter("strata_fs_read_bytes_total", "Bytes strata returned to FUSE READ requests.", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().ReadBytes.Load() })),
		counter("strata_fs_writes_total", "FUSE WRITE requests strata answered (writes of files written by passthrough never reach it).", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().Writes.Load() })),
		counter("strata_fs_write_bytes_total", "Bytes of the FUSE WRITE requests strata answered.", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().WriteBytes.Load() })),
		counter("strata_fs_passthrough_write_opens_total", "Files created to be written by the kernel straight into their staging file (FUSE passthrough, --upload async).", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().PassthroughWriteOpens.Load() })),
		counter("strata_fs_read_errors_total", "Reads that returned an error.", nil,
			fsStat(func(s *Sources) int64 { return s.FS.Stats().ReadErrors.Load() })),
		gauge("strata_fs_passthrough_enabled", "1 if fully cached files are handed to the kernel.", nil,
			fsStat(func(s *Sources) int64 { return b2i(s.FS.PassthroughEnabled()) })),

		counter("strata_prefetch_errors_total", "Fetches that failed after their retries.", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.FetchErrors.Load() })),
		counter("strata_prefetch_retries_total", "Fetches resumed after a body broke mid-way.", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.Retries.Load() })),
		counter("strata_prefetch_shrunk_windows_total", "Readahead or warming cut short by the memory budget.", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.ShrunkWindows.Load() })),
		counter("strata_prefetch_random_fills_total", "Objects fetched whole in the background because a reader read them at random (--random-fill-max).", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.Fills.Load() })),
		counter("strata_prefetch_uncached_blocks_total", "Fetched blocks the cache could not keep (wasted unless a reader was waiting).", nil,
			fetchStat(func(st *prefetch.Stats) int64 { return st.UncachedBlocks.Load() })),

		gauge("strata_memory_in_use_bytes", "Fetch buffers handed out now.", nil, budgetStat((*prefetch.Budget).InUse)),
		gauge("strata_memory_limit_bytes", "The fetch buffer budget (--memory-limit).", nil, budgetStat((*prefetch.Budget).Limit)),
		gauge("strata_memory_peak_bytes", "Most fetch buffers ever handed out at once.", nil, budgetStat((*prefetch.Budget).Peak)),
	}
	for _, p := range []prefetch.Priority{prefetch.Demand, prefetch.Readahead, prefetch.Background} {
		l := prometheus.Labels{"priority": p.String()}
		out = append(out,
			counter("strata_prefetch_fetched_bytes_total", "Bytes fetched from the origin into blocks, by priority (demand, readahead, background = warming).", l,
				fetchStat(func(st *prefetch.Stats) int64 { return st.FetchedBytes[p].Load() })),
			counter("strata_prefetch_fetches_total", "Ranged GETs started, by priority.", l,
				fetchStat(func(st *prefetch.Stats) int64 { return st.Fetches[p].Load() })),
			gauge("strata_prefetch_queued_fetches", "Fetches waiting to start, by priority.", l,
				func(s *Sources) (float64, bool) {
					if s.Fetcher == nil {
						return 0, false
					}
					q, _ := s.Fetcher.Queued()
					return float64(q[p]), true
				}),
		)
	}
	out = append(out, gauge("strata_prefetch_running_fetches", "Fetches (GETs) in progress.", nil,
		func(s *Sources) (float64, bool) {
			if s.Fetcher == nil {
				return 0, false
			}
			_, n := s.Fetcher.Queued()
			return float64(n), true
		}))
	return out
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
