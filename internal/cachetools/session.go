package cachetools

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
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
	// ReadErrors are the READs answered with an error (EIO with the
	// bucket unreachable, ESTALE...).
	ReadErrors int64 `json:"read_errors"`
	// Writes and WriteBytes are the FUSE WRITE requests the mount
	// answered; PTWriteOpens the files created to be written by
	// passthrough (their writes never reach it).
	Writes       int64 `json:"writes"`
	WriteBytes   int64 `json:"write_bytes"`
	PTWriteOpens int64 `json:"passthrough_write_opens"`
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

func SessionPath(cacheDir string) string { return filepath.Join(cacheDir, "session.json") }

// ReadSession loads a cache dir's session.json, if any.
func ReadSession(cacheDir string) (Session, bool) {
	var s Session
	b, err := os.ReadFile(SessionPath(cacheDir))
	if err != nil || json.Unmarshal(b, &s) != nil {
		return s, false
	}
	return s, true
}

// The hit ratio history: every mount, when it ends, appends its final
// session summary to <cache-dir>/history.json (the newest last, at most
// --history entries), so `strata cache stats` can show how well the cache
// served each run (epoch 1 misses, epoch 2 hits, a restart that kept the
// cache...).

func historyPath(dir string) string { return filepath.Join(dir, "history.json") }

// ReadHistory returns the recorded sessions, oldest first.
func ReadHistory(dir string) []Session {
	b, err := os.ReadFile(historyPath(dir))
	if err != nil {
		return nil
	}
	var h []Session
	if json.Unmarshal(b, &h) != nil {
		return nil
	}
	return h
}

// AppendHistory adds s and keeps the last keep entries. Only the process
// owning the cache dir calls it, so there is no concurrent writer.
func AppendHistory(dir string, s Session, keep int) error {
	h := append(ReadHistory(dir), s)
	if len(h) > keep {
		h = h[len(h)-keep:]
	}
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	tmp := historyPath(dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := os.Rename(tmp, historyPath(dir)); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// HitRatio is the share of bytes read that were found in the cache:
// bytes served by prefetching came from the origin during the run.
func HitRatio(s Session) (float64, int64) {
	total := s.HitBytes + s.PrefetchHitBytes + s.MissBytes
	if total == 0 {
		return 0, 0
	}
	return float64(s.HitBytes) / float64(total), total
}
