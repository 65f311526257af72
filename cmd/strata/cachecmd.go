package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
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

func cacheStatsCmd() *cobra.Command {
	var dir string
	var asJSON bool
	var last int
	cmd := &cobra.Command{
		Use:   "stats [MOUNTPOINT | --cache-dir DIR]",
		Short: "Show what a cache directory holds and the hit ratio of its mounts",
		Example: `  strata cache stats --cache-dir /nvme/strata
  strata cache stats --cache-dir /nvme/strata --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := cachetools.CollectStats(dir)
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
	cacheDirOrMount(cmd, &dir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&last, "last", config.Tools().StatsLast, "mounts of the history to show")
	return cmd
}

func printStats(st cachetools.Stats, last int) {
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
		ratio, total := cachetools.HitRatio(*s)
		fmt.Printf("hit ratio:   %.1f%% of %s read (%s prefetched, %s fetched in %d GETs)\n", 100*ratio, sizeStr(total),
			sizeStr(s.PrefetchHitBytes), sizeStr(s.FetchedBytes), s.Fetches)
		fmt.Printf("opens:       %d (%d passthrough, %d userspace)\n", s.Opens, s.PTOpens, s.USOpens)
		fmt.Printf("reads:       %d FUSE READs answered by strata, %s (passthrough reads never reach it)\n", s.Reads, sizeStr(s.ReadBytes))
		if s.ReadErrors > 0 || s.FetchErrors > 0 {
			// Without it the stats of a mount whose bucket is unreachable
			// looked healthy: the counters were kept, never shown.
			fmt.Printf("errors:      %d reads failed, %d fetches from the bucket failed (the mount's log says why)\n", s.ReadErrors, s.FetchErrors)
		}
		fmt.Printf("writes:      %d FUSE WRITEs answered by strata, %s; %d files written by passthrough (their writes never reach it)\n", s.Writes, sizeStr(s.WriteBytes), s.PTWriteOpens)
	}
	printHistory(st.History, last)
}

// printHistory shows the newest sessions first.
func printHistory(h []cachetools.Session, n int) {
	if len(h) == 0 {
		return
	}
	fmt.Println("history:     hit ratio of each mount, newest first")
	for i := len(h) - 1; i >= 0 && i >= len(h)-n; i-- {
		s := h[i]
		ratio, total := cachetools.HitRatio(s)
		dur := s.Updated.Sub(s.Started).Round(time.Second)
		fmt.Printf("  %s  %-8s %5.1f%% of %-9s %s fetched in %d GETs, %d opens (%d passthrough)  %s\n",
			s.Started.Local().Format("2006-01-02 15:04"), fmtDuration(dur), 100*ratio, sizeStr(total),
			sizeStr(s.FetchedBytes), s.Fetches, s.Opens, s.PTOpens, s.Source)
	}
}
