package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/internal/config"
)

func cacheCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Inspect and manage a cache directory"}
	cmd.AddCommand(cacheStatsCmd())
	return cmd
}

// CacheStats is the output of `strata cache stats --json`.
type CacheStats struct {
	CacheDir  string   `json:"cache_dir"`
	InUseBy   string   `json:"in_use_by,omitempty"`
	SizeBytes int64    `json:"size_bytes"`
	Objects   int64    `json:"objects"`
	Blocks    int64    `json:"blocks"`
	BlockSize int64    `json:"block_size"`
	Session   *Session `json:"session,omitempty"`
}

func cacheStatsCmd() *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats --cache-dir DIR",
		Short: "Show what a cache directory holds and the last mount's hit ratio",
		Args:  cobra.NoArgs,
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
			printStats(st)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "cache-dir", "", "cache directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("cache-dir")
	return cmd
}

// collectStats reads a cache directory: from its index when nobody holds
// it, from the running mount's session file when a mount does.
func collectStats(dir string) (CacheStats, error) {
	st := CacheStats{CacheDir: dir}
	if _, err := os.Stat(filepath.Join(dir, "index")); err != nil {
		return st, fmt.Errorf("%s is not a strata cache directory: %w", dir, err)
	}
	if s, ok := readSession(dir); ok {
		st.Session = &s
	}
	if holder := cache.LockHolder(dir); holder != "" {
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

func printStats(st CacheStats) {
	fmt.Printf("cache dir:   %s\n", st.CacheDir)
	if st.InUseBy != "" {
		fmt.Printf("in use by:   %s\n", st.InUseBy)
	} else {
		fmt.Printf("objects:     %d (%d blocks of %s)\n", st.Objects, st.Blocks, config.Size(st.BlockSize))
	}
	fmt.Printf("size:        %s\n", config.Size(st.SizeBytes))
	if s := st.Session; s != nil {
		state := "finished"
		if s.Running {
			state = "running"
		}
		fmt.Printf("last mount:  %s on %s (%s, pid %d)\n", s.Source, s.Mountpoint, state, s.PID)
		total := s.HitBytes + s.MissBytes
		ratio := 0.0
		if total > 0 {
			ratio = float64(s.HitBytes) / float64(total)
		}
		fmt.Printf("hit ratio:   %.1f%% of %s read (%s fetched in %d GETs)\n", 100*ratio, config.Size(total), config.Size(s.FetchedBytes), s.Fetches)
	}
}
