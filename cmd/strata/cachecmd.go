package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
)

func cacheCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Inspect and manage a cache directory",
		Long: `Inspect and manage a cache directory. While a mount serves the directory,
stats, verify and gc are done by the mount through its control socket;
clear refuses (unmount first).`,
	}
	cmd.AddCommand(cacheStatsCmd(), cacheVerifyCmd(), cacheGCCmd(), cacheClearCmd())
	return cmd
}

// CacheStats is the output of `strata cache stats --json`.
type CacheStats struct {
	CacheDir   string    `json:"cache_dir"`
	InUseBy    string    `json:"in_use_by,omitempty"`
	Live       bool      `json:"live"` // counted by the running mount
	SizeBytes  int64     `json:"size_bytes"`
	LimitBytes int64     `json:"limit_bytes,omitempty"`
	Objects    int64     `json:"objects"`
	Blocks     int64     `json:"blocks"`
	BlockSize  int64     `json:"block_size"`
	Session    *Session  `json:"session,omitempty"`
	History    []Session `json:"history,omitempty"`
}

func cacheStatsCmd() *cobra.Command {
	var dir string
	var asJSON bool
	var last int
	cmd := &cobra.Command{
		Use:   "stats --cache-dir DIR",
		Short: "Show what a cache directory holds and the hit ratio of its mounts",
		Example: `  strata cache stats --cache-dir /nvme/strata
  strata cache stats --cache-dir /nvme/strata --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := collectStats(dir)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStats(st, last)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "cache-dir", "", "cache directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&last, "last", 10, "mounts of the history to show")
	requireFlag(cmd, "cache-dir")
	return cmd
}

// collectStats reads a cache directory: through the running mount's
// control socket when a mount holds it, from its index when nobody does,
// and from session.json when another process holds it.
func collectStats(dir string) (CacheStats, error) {
	st := CacheStats{CacheDir: dir}
	conn, holder, err := control.Owner(dir)
	if conn != nil {
		defer conn.Close()
		if err := conn.Call(control.Request{Op: "stats"}, nil, &st); err != nil {
			return st, err
		}
		st.CacheDir, st.History = dir, readHistory(dir)
		return st, nil
	}
	if holder == "" && err != nil {
		return st, err
	}
	st.History = readHistory(dir)
	if s, ok := readSession(dir); ok {
		st.Session = &s
	}
	if holder != "" {
		st.InUseBy = holder
		if st.Session != nil {
			st.SizeBytes = st.Session.UsedBytes
		}
		return st, nil
	}
	ix, err := index.Open(filepath.Join(dir, "index"), index.DefaultOptions())
	if err != nil {
		return st, err
	}
	defer ix.Close()
	if f, ok, _ := ix.ReadFormat(); ok {
		st.BlockSize = f.BlockSize
	}
	err = ix.ScanBlockUsage(func(_ index.ID, blocks, bytes int64) error {
		st.Objects++
		st.Blocks += blocks
		st.SizeBytes += bytes
		return nil
	})
	return st, err
}

// liveStats is the control socket's answer to "stats".
func liveStats(s *server) (CacheStats, error) {
	st := CacheStats{
		CacheDir: s.cfg.CacheDir, Live: true, InUseBy: fmt.Sprintf("pid %d (mount %s)", os.Getpid(), s.mnt),
		SizeBytes: s.store.Used(), LimitBytes: s.store.Limit(), BlockSize: s.store.BlockSize(),
	}
	if s.session != nil {
		sn := s.session.snapshot(true)
		st.Session = &sn
	}
	err := s.store.Index().ScanBlockUsage(func(_ index.ID, blocks, _ int64) error {
		st.Objects++
		st.Blocks += blocks
		return nil
	})
	return st, err
}

func printStats(st CacheStats, last int) {
	fmt.Printf("cache dir:   %s\n", st.CacheDir)
	if st.InUseBy != "" {
		how := "(counts from its last session file)"
		if st.Live {
			how = "(live counts through its control socket)"
		}
		fmt.Printf("in use by:   %s %s\n", st.InUseBy, how)
	}
	if st.InUseBy == "" || st.Live {
		fmt.Printf("objects:     %d (%d blocks of %s)\n", st.Objects, st.Blocks, config.Size(st.BlockSize))
	}
	size := sizeStr(st.SizeBytes)
	if st.LimitBytes > 0 && st.LimitBytes < 1<<62 {
		size += " of " + sizeStr(st.LimitBytes) + " allowed"
	}
	fmt.Printf("size:        %s\n", size)
	if s := st.Session; s != nil {
		state := "finished"
		if s.Running {
			state = "running"
		}
		fmt.Printf("last mount:  %s on %s (%s, pid %d)\n", s.Source, s.Mountpoint, state, s.PID)
		ratio, total := hitRatio(*s)
		fmt.Printf("hit ratio:   %.1f%% of %s read (%s prefetched, %s fetched in %d GETs)\n", 100*ratio, sizeStr(total),
			sizeStr(s.PrefetchHitBytes), sizeStr(s.FetchedBytes), s.Fetches)
		fmt.Printf("opens:       %d (%d passthrough, %d userspace)\n", s.Opens, s.PTOpens, s.USOpens)
		fmt.Printf("reads:       %d FUSE READs answered by strata, %s (passthrough reads never reach it)\n", s.Reads, sizeStr(s.ReadBytes))
	}
	printHistory(st.History, last)
}

// offlineStore opens a cache dir nobody holds for a maintenance command,
// with the block size it was created with. maxBytes 0 keeps 10% of the
// disk free; frozen keeps the LRU order as it is (reading every object
// must not make them all "recently used").
func offlineStore(dir, owner string, maxBytes int64, frozen bool) (*cache.Store, func(), error) {
	bs, ok := cacheBlockSize(dir)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a strata cache directory (no readable index)", dir)
	}
	cfg := config.Defaults()
	eng, err := newEngine(cfg.IOEngine)
	if err != nil {
		return nil, nil, err
	}
	so := cache.DefaultOptions()
	so.BlockSize, so.Engine, so.Owner = bs, eng, owner
	so.Logger = newLogger(os.Stderr, "warn", "text")
	so.MaxBytes, so.MinFree = maxBytes, 0
	if maxBytes == 0 {
		so.MinFree = config.MinFreeFraction
	}
	if frozen {
		so.Clock = frozenClock
	}
	privateFiles()
	store, err := cache.Open(dir, so)
	if err != nil {
		eng.Close()
		return nil, nil, err
	}
	return store, func() { store.Close(); eng.Close() }, nil
}

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

// hitRatio is the share of bytes read that were found in the cache:
// bytes served by prefetching came from the origin during the run.
func hitRatio(s Session) (float64, int64) {
	total := s.HitBytes + s.PrefetchHitBytes + s.MissBytes
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
