package main

import (
	"log/slog"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/internal/config"
)

// Signals a running mount handles besides SIGTERM/SIGINT (mount.go):
//   SIGHUP   reopen the log file (after logrotate moved it away)
//   SIGUSR1  write every counter to the log, one line

// stderrFile returns the path of the regular file stderr writes to (the
// log file of a background mount, or a file a foreground mount was
// redirected to), or "" when stderr is a terminal, pipe or socket.
func stderrFile() string {
	var st unix.Stat_t
	if err := unix.Fstat(2, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ""
	}
	p, err := os.Readlink("/proc/self/fd/2")
	if err != nil || !strings.HasPrefix(p, "/") {
		return ""
	}
	return strings.TrimSuffix(p, " (deleted)")
}

// reopenLog points stdout and stderr at a fresh open of the log file, so
// a rotated-away file is released and new lines go to the new one.
func (o *opsState) reopenLog(s *server) {
	if o.logPath == "" {
		s.log.Info("SIGHUP: logging to a terminal or pipe; no log file to reopen")
		return
	}
	f, err := os.OpenFile(o.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.log.Warn("SIGHUP: reopening the log file", "path", o.logPath, "err", err)
		return
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			s.log.Warn("SIGHUP: reopening the log file", "path", o.logPath, "err", err)
			return
		}
	}
	s.log.Info("SIGHUP: log file reopened", "path", o.logPath)
}

// dumpStats writes the session counters and every strata_* series to the
// log in one line (SIGUSR1).
func dumpStats(s *server) {
	attrs := []any{"version", config.Version, "source", s.src.String(), "mountpoint", s.mnt}
	if s.session != nil {
		sn := s.session.snapshot(true)
		attrs = append(attrs,
			"cache_used", sn.UsedBytes, "cache_limit", sn.LimitBytes,
			"hit_bytes", sn.HitBytes, "miss_bytes", sn.MissBytes, "hit_ops", sn.HitOps, "miss_ops", sn.MissOps,
			"fetched_bytes", sn.FetchedBytes, "fetches", sn.Fetches, "fetch_errors", sn.FetchErrors,
			"opens", sn.Opens, "passthrough_opens", sn.PTOpens, "evicted_bytes", sn.EvictedBytes,
			"corrupt_blocks", sn.CorruptBlks, "memory_peak", sn.MemoryPeak)
	}
	if s.ops != nil {
		samples, err := s.ops.metrics.Snapshot()
		if err != nil {
			s.log.Warn("SIGUSR1: gathering metrics", "err", err)
		}
		m := make([]any, 0, len(samples))
		for _, x := range samples {
			m = append(m, slog.Float64(x.Name, x.Value))
		}
		attrs = append(attrs, slog.Group("metrics", m...))
	}
	s.log.Info("stats (SIGUSR1)", attrs...)
}
