package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratafs/strata/prefetch"
)

// Session is what a mount reports about itself in <cache-dir>/session.json,
// refreshed every few seconds and at exit, so `strata cache stats` can show
// a running or finished mount's counters without touching its index.
type Session struct {
	PID          int       `json:"pid"`
	Source       string    `json:"source"`
	Mountpoint   string    `json:"mountpoint"`
	Started      time.Time `json:"started"`
	Updated      time.Time `json:"updated"`
	Running      bool      `json:"running"`
	Passthrough  bool      `json:"passthrough"`
	UsedBytes    int64     `json:"used_bytes"`
	LimitBytes   int64     `json:"limit_bytes"`
	HitBytes     int64     `json:"hit_bytes"`
	MissBytes    int64     `json:"miss_bytes"`
	HitOps       int64     `json:"hit_ops"`
	MissOps      int64     `json:"miss_ops"`
	FetchedBytes int64     `json:"fetched_bytes"`
	Fetches      int64     `json:"fetches"`
	FetchErrors  int64     `json:"fetch_errors"`
	Opens        int64     `json:"opens"`
	PTOpens      int64     `json:"passthrough_opens"`
	EvictedBytes int64     `json:"evicted_bytes"`
	CorruptBlks  int64     `json:"corrupt_blocks"`
	MemoryPeak   int64     `json:"memory_peak_bytes"`
	// USOpens are the opens served in userspace; Reads and ReadBytes the
	// FUSE READ requests the mount answered and their bytes (reads of
	// passthrough opens never reach it).
	USOpens   int64 `json:"userspace_opens"`
	Reads     int64 `json:"reads"`
	ReadBytes int64 `json:"read_bytes"`
	// PrefetchHitOps and PrefetchHitBytes are reads (and passthrough
	// opens) served from blocks prefetched in this run; HitOps and
	// HitBytes count passthrough opens of fully cached files as well.
	PrefetchHitOps   int64 `json:"prefetch_hit_ops"`
	PrefetchHitBytes int64 `json:"prefetch_hit_bytes"`
	// PendingUploads is what the mount still has to upload; the last
	// write (at unmount, before the drain) is what a new mount of the same
	// cache dir reports while it waits for this one to finish.
	PendingUploads int `json:"pending_uploads"`
}

type sessionWriter struct {
	s       *server
	started time.Time
	stopCh  chan struct{}
	done    sync.WaitGroup
}

func sessionPath(cacheDir string) string { return filepath.Join(cacheDir, "session.json") }

func startSession(s *server) *sessionWriter {
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
func (w *sessionWriter) snapshot(running bool) Session {
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
	return Session{
		PendingUploads: pending,
		PID:            os.Getpid(), Source: s.src.String(), Mountpoint: s.mnt, Started: w.started, Updated: time.Now(),
		Running: running, Passthrough: s.mounted.Passthrough, UsedBytes: s.store.Used(), LimitBytes: s.store.Limit(),
		HitBytes: fst.HitBytes.Load(), MissBytes: fst.MissBytes.Load(), HitOps: fst.HitOps.Load(), MissOps: fst.MissOps.Load(),
		FetchedBytes: fetched, Fetches: fetches, FetchErrors: fst.FetchErrors.Load(),
		Opens: fs.Opens.Load(), PTOpens: fs.PassthroughOpens.Load(), USOpens: fs.UserspaceOpens.Load(),
		Reads: fs.Reads.Load(), ReadBytes: fs.ReadBytes.Load(),
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
	p := sessionPath(w.s.cfg.CacheDir)
	tmp := p + ".tmp"
	// Best effort, like the marshal above: the next write tries again.
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		_ = os.Rename(tmp, p)
	}
}

// readSession loads a cache dir's session.json, if any.
func readSession(cacheDir string) (Session, bool) {
	var s Session
	b, err := os.ReadFile(sessionPath(cacheDir))
	if err != nil || json.Unmarshal(b, &s) != nil {
		return s, false
	}
	return s, true
}
