package mount

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/metrics"
)

// opsState is what operations keep while mounted (metrics server, ...).
type opsState struct {
	metrics *metrics.Metrics
	http    *metrics.Server
	control *control.Server
	logPath string // the file stderr was writing to at mount, reopened on SIGHUP

	sigs chan os.Signal
	done chan struct{}
	wg   sync.WaitGroup
}

// opsOf returns s's operational state, creating it on first use: the
// backend and the FUSE observer are instrumented before startOps runs.
func opsOf(s *Mount) *opsState {
	if s.ops == nil {
		s.ops = &opsState{metrics: metrics.New(), done: make(chan struct{})}
	}
	return s.ops
}

// instrumentBackend counts and times every request to the origin (one
// line in open, right after the backend is opened).
func instrumentBackend(s *Mount, be backend.Backend) backend.Backend {
	return opsOf(s).metrics.WrapBackend(be)
}

// opsObserver is fs.Options.Observe: every FUSE operation, for metrics.
func opsObserver(s *Mount) func(op string, d time.Duration, errno syscall.Errno) {
	return opsOf(s).metrics.ObserveFUSE
}

// registerUploadQueue is the write path's hook: fn is read at every scrape
// (and SIGUSR1 dump) for the upload queue gauges. It may be called before
// or after startOps.
func registerUploadQueue(s *Mount, fn func() metrics.UploadQueue) {
	opsOf(s).metrics.SetUploadQueue(fn)
}

// startOps starts operational services once the filesystem is mounted
// and before readiness is reported; an error fails the mount.
func startOps(s *Mount) error {
	o := opsOf(s)
	src := metrics.Sources{FS: s.fsys, Fetcher: s.fetch, Store: s.store}
	if s.shared != nil && s.shared.tier != nil {
		src.Shared = s.shared.tier.Stats()
	}
	o.metrics.SetSources(src)
	o.metrics.SetInfo(metrics.Info{Version: config.Version, Source: s.be.String(), Mount: s.mnt, IOEngine: s.eng.Name()})
	if addr := s.cfg.Ops.MetricsAddr; addr != "" {
		srv, err := o.metrics.Listen(addr)
		if err != nil {
			return fmt.Errorf("--metrics-addr %s: %w", addr, err)
		}
		o.http = srv
		s.log.Info("metrics", "url", "http://"+srv.Addr+"/metrics")
	}
	if s.cfg.Ops.ControlSocket {
		c, err := startControl(s)
		if err != nil {
			return fmt.Errorf("control socket in %s: %w", s.cfg.CacheDir, err)
		}
		o.control = c
		if s.fsys != nil {
			s.fsys.SetControlDir(s.cfg.CacheDir) // strata refresh finds the socket by the mount
		}
	}
	o.logPath = stderrFile()
	o.sigs = make(chan os.Signal, 4)
	signal.Notify(o.sigs, syscall.SIGHUP, syscall.SIGUSR1)
	o.wg.Add(1)
	go o.signalLoop(s)
	return nil
}

// stopOps stops them at unmount, before the cache closes: warm jobs
// running through the control socket are cancelled and waited for, and
// the session's summary joins the cache dir's history.
func stopOps(s *Mount) {
	o := s.ops
	if o.sigs != nil {
		signal.Stop(o.sigs)
		close(o.done)
		o.wg.Wait()
	}
	if o.control != nil {
		o.control.Close()
	}
	if o.http != nil {
		o.http.Close()
	}
	if o.sigs != nil && s.session != nil && s.cfg.Ops.History > 0 { // a mount that served
		if err := cachetools.AppendHistory(s.cfg.CacheDir, s.session.snapshot(false), s.cfg.Ops.History); err != nil {
			s.log.Warn("saving the session to the cache history", "err", err)
		}
	}
}

func (o *opsState) signalLoop(s *Mount) {
	defer o.wg.Done()
	for {
		select {
		case <-o.done:
			return
		case sig := <-o.sigs:
			switch sig {
			case syscall.SIGHUP:
				o.reopenLog(s)
			case syscall.SIGUSR1:
				dumpStats(s)
			}
		}
	}
}

// Signals a running mount handles besides SIGTERM/SIGINT (cmd/strata mount.go):
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
func (o *opsState) reopenLog(s *Mount) {
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
func dumpStats(s *Mount) {
	attrs := []any{"version", config.Version, "source", s.src.String(), "mountpoint", s.mnt}
	if s.session != nil {
		sn := s.session.snapshot(true)
		attrs = append(attrs,
			"cache_used", sn.UsedBytes, "cache_limit", sn.LimitBytes,
			"hit_bytes", sn.HitBytes, "miss_bytes", sn.MissBytes, "hit_ops", sn.HitOps, "miss_ops", sn.MissOps,
			"fetched_bytes", sn.FetchedBytes, "fetches", sn.Fetches, "fetch_errors", sn.FetchErrors,
			"prefetch_hit_bytes", sn.PrefetchHitBytes, "prefetch_hit_ops", sn.PrefetchHitOps,
			"opens", sn.Opens, "passthrough_opens", sn.PTOpens, "userspace_opens", sn.USOpens,
			"reads", sn.Reads, "read_bytes", sn.ReadBytes, "evicted_bytes", sn.EvictedBytes,
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
