package main

import (
	"fmt"
	"io"

	"github.com/stratafs/strata/integration/workload"
)

// writeReport prints the short summary that ends the demo.
func writeReport(w io.Writer, r *Result) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Strata demo: %d files (%s) on %s, read with %s by %d processes\n",
		r.Files, workload.FormatSize(r.Bytes), r.Server, r.Cfg.Mounter, r.Cfg.Procs)
	fmt.Fprintf(w, "machine: %s\n", r.Machine)
	if r.DropErr != nil {
		fmt.Fprintln(w, "note: the page cache could not be dropped: warm figures may come from RAM")
	} else {
		fmt.Fprintln(w, "page cache dropped before each pass")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| pass | files/s | MB/s | p50 per file | p99 per file | time |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|")
	line := func(name string, s workload.Summary) {
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %s | %s | %s |\n", name, s.OpsPerSec(), s.MBps(),
			workload.FormatLatency(s.P50), workload.FormatLatency(s.P99), workload.FormatLatency(s.Elapsed))
	}
	line("epoch 1 (cold, from "+serverName(r.Cfg)+")", r.Epoch1)
	line("epoch 2 (warm, from the cache)", r.Epoch2)
	line("local disk (source directory)", r.Local)
	fmt.Fprintln(w)
	if r.Local.OpsPerSec() > 0 && r.Epoch1.OpsPerSec() > 0 {
		fmt.Fprintf(w, "epoch 2 = %.2f× local disk and %.1f× epoch 1 (files/s)\n",
			r.Epoch2.OpsPerSec()/r.Local.OpsPerSec(), r.Epoch2.OpsPerSec()/r.Epoch1.OpsPerSec())
	}
	switch {
	case r.Cfg.Mounter != "strata":
	case r.StatsErr != nil:
		fmt.Fprintf(w, "cache hit ratio: unavailable (%v)\n", r.StatsErr)
	case r.Stats2 != nil:
		fmt.Fprintf(w, "cache: epoch 1 %s\n", hitLine(r.Stats1, r.Epoch1.Bytes))
		fmt.Fprintf(w, "       epoch 2 %s\n", hitLine(r.Stats2, r.Epoch2.Bytes))
		if r.Final != nil {
			fmt.Fprintf(w, "       after unmount the cache holds %s", workload.FormatSize(r.Final.SizeBytes))
			if r.Final.Objects > 0 {
				fmt.Fprintf(w, " in %d objects", r.Final.Objects)
			}
			fmt.Fprintln(w, " (`strata cache stats --cache-dir ... --json`)")
		}
	}
	if r.Cfg.Verify {
		fmt.Fprintf(w, "sha256: %d of %d files match the source\n", r.Verified, r.Files)
	}
	fmt.Fprintln(w)
}

// hitLine describes one epoch: the share of bytes served without a fetch,
// strata's own hit ratio (bytes found in the cache, passthrough opens
// counting their files' size, over all bytes it counted) and how many
// opens the kernel served by passthrough.
func hitLine(s *workload.CacheStats, read int64) string {
	out := fmt.Sprintf("%.1f%% of bytes served from the cache (%s fetched)",
		100*s.ServedRatio(read), workload.FormatSize(s.Session.FetchedBytes))
	if all := s.Session.HitBytes + s.Session.PrefetchHitBytes + s.Session.MissBytes; all > 0 {
		out += fmt.Sprintf("; hit ratio %.1f%% of %s", 100*s.HitRatio(), workload.FormatSize(all))
	}
	if s.Session.Opens > 0 {
		out += fmt.Sprintf(", %d of %d opens by passthrough", s.Session.PassthroughOpens, s.Session.Opens)
	}
	return out
}
