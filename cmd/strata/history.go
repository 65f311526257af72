package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The hit ratio history: every mount, when it ends, appends its final
// session summary to <cache-dir>/history.json (the newest last, at most
// --history entries), so `strata cache stats` can show how well the cache
// served each run (epoch 1 misses, epoch 2 hits, a restart that kept the
// cache...).

func historyPath(dir string) string { return filepath.Join(dir, "history.json") }

// readHistory returns the recorded sessions, oldest first.
func readHistory(dir string) []Session {
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

// appendHistory adds s and keeps the last keep entries. Only the process
// owning the cache dir calls it, so there is no concurrent writer.
func appendHistory(dir string, s Session, keep int) error {
	h := append(readHistory(dir), s)
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

// hitRatio is the share of bytes read that came from the cache.
func hitRatio(s Session) (float64, int64) {
	total := s.HitBytes + s.MissBytes
	if total == 0 {
		return 0, 0
	}
	return float64(s.HitBytes) / float64(total), total
}

// printHistory shows the newest sessions first.
func printHistory(h []Session, n int) {
	if len(h) == 0 {
		return
	}
	fmt.Println("history:     hit ratio of each mount, newest first")
	for i := len(h) - 1; i >= 0 && i >= len(h)-n; i-- {
		s := h[i]
		ratio, total := hitRatio(s)
		dur := s.Updated.Sub(s.Started).Round(time.Second)
		fmt.Printf("  %s  %-8s %5.1f%% of %-9s %s fetched in %d GETs, %d opens (%d passthrough)  %s\n",
			s.Started.Local().Format("2006-01-02 15:04"), fmtDuration(dur), 100*ratio, sizeStr(total),
			sizeStr(s.FetchedBytes), s.Fetches, s.Opens, s.PTOpens, s.Source)
	}
}
