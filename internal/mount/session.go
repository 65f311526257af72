package mount

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/prefetch"
)

type sessionWriter struct {
	s       *Mount
	started time.Time
	stopCh  chan struct{}
	done    sync.WaitGroup
}

func startSession(s *Mount) *sessionWriter {
	w := &sessionWriter{s: s, started: time.Now(), stopCh: make(chan struct{})}
	w.write(true)
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-w.stopCh:
				return
			case <-t.C:
				w.write(true)
			}
		}
	}()
	return w
}

func (w *sessionWriter) stop() {
	close(w.stopCh)
	w.done.Wait()
	w.write(false)
}

// snapshot collects the live counters.
func (w *sessionWriter) snapshot(running bool) cachetools.Session {
	s := w.s
	fst, sst, fs := s.fetch.Stats(), s.store.Stats(), s.fsys.Stats()
	var fetched, fetches int64
	for p := range fst.FetchedBytes {
		fetched += fst.FetchedBytes[p].Load()
		fetches += fst.Fetches[p].Load()
	}
	pending := 0
	if s.wb != nil {
		pending = s.wb.Summary().Pending
	}
	return cachetools.Session{
		PendingUploads: pending,
		PID:            os.Getpid(), Source: s.src.String(), Mountpoint: s.mnt, Started: w.started, Updated: time.Now(),
		Running: running, Passthrough: s.mounted.Passthrough, UsedBytes: s.store.Used(), LimitBytes: s.store.Limit(),
		HitBytes: fst.HitBytes.Load(), MissBytes: fst.MissBytes.Load(), HitOps: fst.HitOps.Load(), MissOps: fst.MissOps.Load(),
		FetchedBytes: fetched, Fetches: fetches, FetchErrors: fst.FetchErrors.Load(),
		Opens: fs.Opens.Load(), PTOpens: fs.PassthroughOpens.Load(), USOpens: fs.UserspaceOpens.Load(),
		Reads: fs.Reads.Load(), ReadBytes: fs.ReadBytes.Load(), ReadErrors: fs.ReadErrors.Load(),
		Writes: fs.Writes.Load(), WriteBytes: fs.WriteBytes.Load(), PTWriteOpens: fs.PassthroughWriteOpens.Load(),
		PrefetchHitOps: fst.PrefetchHitOps.Load(), PrefetchHitBytes: fst.PrefetchHitBytes.Load(),
		EvictedBytes: sst.EvictedBytes.Load(), CorruptBlks: sst.CorruptBlocks.Load(),
		MemoryPeak: budgetPeak(s.fetch),
	}
}

func budgetPeak(f *prefetch.Fetcher) int64 { return f.Budget().Peak() }

// write replaces session.json atomically.
func (w *sessionWriter) write(running bool) {
	b, err := json.MarshalIndent(w.snapshot(running), "", "  ")
	if err != nil {
		return
	}
	p := cachetools.SessionPath(w.s.cfg.CacheDir)
	tmp := p + ".tmp"
	// Best effort, like the marshal above: the next write tries again.
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		_ = os.Rename(tmp, p)
	}
}
