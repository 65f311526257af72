package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/csi"
	"github.com/stratafs/strata/internal/mount"
)

// Options say where the hand-offs arrive and how to serve them.
type Options struct {
	HandoffDir string // the emptyDir shared with the node plugin
	CacheDir   string // parent of the per-volume cache directories
	// WaitTimeout: Run fails if no volume is handed over within it (0:
	// wait forever).
	WaitTimeout time.Duration
	Logger      *slog.Logger
	// MountFlags is the mount command's flags bound to cfg: a hand-off's
	// mount options are parsed with it.
	MountFlags func(cfg *config.Config) *pflag.FlagSet
}

// Probe succeeds when at least one volume was handed over and
// every one is served.
func Probe(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		if _, err := os.Stat(filepath.Join(dir, e.Name(), csi.ReadyName)); err != nil {
			msg, _ := os.ReadFile(filepath.Join(dir, e.Name(), csi.ErrorName))
			return fmt.Errorf("probe: volume %s not served yet %s", e.Name(), msg)
		}
	}
	if n == 0 {
		return errors.New("probe: no volume handed over yet")
	}
	return nil
}

// sidecar serves every volume found in the hand-off directory.
type sidecar struct {
	o    Options
	log  *slog.Logger
	plan *csi.MemoryPlan
	// startMu serialises starts: credentials reach the backends through
	// the process environment, which is read while a backend is built.
	startMu sync.Mutex
}

// Run serves every volume handed over in o.HandoffDir until all are
// unmounted, the plugin says exit, or SIGTERM/SIGINT.
func Run(o Options) error {
	s := &sidecar{o: o, log: o.Logger}
	s.planMemory()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var wg sync.WaitGroup
	seen := map[string]bool{}
	running := 0                 // volumes being served; only this loop counts them
	ended := make(chan struct{}) // one token per volume that ended
	started := time.Now()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	s.log.Info("sidecar: waiting for volumes", "handoff_dir", o.HandoffDir)
	for {
		socks, _ := filepath.Glob(filepath.Join(o.HandoffDir, "*", csi.SocketName))
		for _, sock := range socks {
			dir := filepath.Dir(sock)
			if seen[dir] {
				continue
			}
			seen[dir] = true
			running++
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serveVolume(ctx, dir)
				select {
				case ended <- struct{}{}:
				case <-ctx.Done(): // the loop is waiting for wg, not reading
				}
			}()
		}
		if len(seen) == 0 && o.WaitTimeout > 0 && time.Since(started) > o.WaitTimeout {
			return fmt.Errorf("sidecar: no volume handed over in %s (is the pod using a Strata volume in sidecar mode, and %s its hand-off emptyDir?)", o.WaitTimeout, o.HandoffDir)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			s.log.Info("sidecar: stopped by signal")
			return nil
		case <-ended:
			if running--; running == 0 {
				wg.Wait()
				s.log.Info("sidecar: every volume is unmounted; exiting")
				return nil
			}
		case <-t.C:
		}
	}
}

// planMemory bounds the process by its container's memory limit.
func (s *sidecar) planMemory() {
	limit, err := csi.CgroupMemoryLimit()
	if err != nil {
		if !csi.IsNoLimit(err) {
			s.log.Warn("sidecar: cannot read the cgroup memory limit", "err", err)
		} else {
			s.log.Warn("sidecar: the container has no memory limit; set resources.limits.memory to bound the sidecar")
		}
		return
	}
	p := csi.PlanMemory(limit, 4*int64(config.Defaults().BlockSize))
	s.plan = &p
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(p.GoLimit)
	}
	s.log.Info("sidecar: memory bounded by the container limit", "limit", config.Size(p.Limit).String(),
		"gomemlimit", config.Size(debug.SetMemoryLimit(-1)).String(), "buffers", config.Size(p.BufferCap).String())
}

// serveVolume takes one volume's hand-off and serves it until it is
// unmounted, the plugin says exit, or ctx ends. A start that fails is
// reported and retried (the plugin keeps the descriptor until one works).
func (s *sidecar) serveVolume(ctx context.Context, dir string) {
	log := s.log.With("volume", filepath.Base(dir))
	backoff := time.Second
	for ctx.Err() == nil {
		srv, conn, err := s.takeHandoff(ctx, dir, log)
		if err == nil {
			s.run(ctx, dir, srv, conn, log)
			return
		}
		if ctx.Err() != nil {
			return
		}
		log.Error("sidecar: cannot serve the volume; retrying", "err", err, "in", backoff)
		if werr := os.WriteFile(filepath.Join(dir, csi.ErrorName), []byte(err.Error()+"\n"), 0o644); werr != nil {
			log.Warn("sidecar: recording the error for the plugin", "err", werr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// takeHandoff connects, receives the descriptor and starts serving it.
func (s *sidecar) takeHandoff(ctx context.Context, dir string, log *slog.Logger) (*mount.Mount, *csi.PluginConn, error) {
	conn, err := csi.DialHandoff(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	h, dev, err := csi.RecvHandoff(conn)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	log.Info("sidecar: received the mount", "handoff", h)
	pc := csi.NewPluginConn(conn)
	var backing *csi.PluginConn
	if h.Backing {
		backing = pc // the plugin registers our cache files for passthrough
	}
	srv, err := s.start(ctx, h, dev, backing, log)
	if err != nil {
		// If this does not reach the plugin, the closed connection tells
		// it the hand-off failed.
		_ = csi.SendControl(conn, csi.Control{Op: csi.OpError, Error: err.Error()})
		conn.Close()
		return nil, nil, err
	}
	if err := csi.SendControl(conn, csi.Control{Op: csi.OpReady}); err != nil {
		log.Warn("sidecar: could not tell the plugin it serves", "err", err)
	}
	os.Remove(filepath.Join(dir, csi.ErrorName))
	if err := os.WriteFile(filepath.Join(dir, csi.ReadyName), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		log.Warn("sidecar: recording that it serves", "err", err)
	}
	return srv, pc, nil
}

// start serves dev as /dev/fd/N with the handed-over options.
func (s *sidecar) start(ctx context.Context, h csi.Handoff, dev *os.File, backing *csi.PluginConn, log *slog.Logger) (*mount.Mount, error) {
	// go-fuse takes ownership of the descriptor it is given: give it a
	// bare duplicate, so no *os.File finaliser ever closes it. If start
	// fails the duplicate may leak; it is released when the process exits.
	fd, err := syscall.Dup(int(dev.Fd()))
	dev.Close()
	if err != nil {
		return nil, fmt.Errorf("sidecar: dup: %w", err)
	}
	cfg := config.Defaults()
	cfg.CacheDir = h.CacheDir
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(s.o.CacheDir, h.VolumeName)
	}
	fs := s.o.MountFlags(&cfg)
	if err := fs.Parse(h.Args); err != nil {
		return nil, fmt.Errorf("sidecar: mount options: %w", err)
	}
	if s.plan != nil && !fs.Changed("memory-limit") {
		cfg.MemoryLimit = config.Size(max(s.plan.BufferCap, 4*int64(cfg.BlockSize)))
	}
	mnt := "/dev/fd/" + strconv.Itoa(fd)
	src, mnt, err := mount.Prepare(&cfg, h.Source, mnt)
	if err != nil {
		return nil, err
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	restore, err := setCredentials(h, filepath.Join(os.TempDir(), "strata-"+h.VolumeName))
	if err != nil {
		return nil, err
	}
	defer restore()
	o := mount.Options{Config: &cfg, Source: src, Mountpoint: mnt, Logger: log}
	if backing != nil {
		o.Backing = backing
	}
	srv, err := mount.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	srv.LogSummary()
	return srv, nil
}

// run waits for the end of one served volume and shuts it down.
func (s *sidecar) run(ctx context.Context, dir string, srv *mount.Mount, conn *csi.PluginConn, log *slog.Logger) {
	served := make(chan struct{})
	go func() { srv.Wait(); close(served) }()
	select {
	case <-served:
		log.Info("sidecar: unmounted")
	case <-conn.Exit():
		log.Info("sidecar: the plugin unpublished the volume")
		select {
		case <-served:
		case <-time.After(5 * time.Second):
		}
	case <-ctx.Done():
		log.Info("sidecar: stopping")
	}
	conn.Close()
	os.Remove(filepath.Join(dir, csi.ReadyName))
	srv.Close()
}

// setCredentials puts a hand-off's credentials where the backends look:
// the environment, and files under dir (0600) for keys such as key.json.
// restore puts the environment back once the backend is built.
func setCredentials(h csi.Handoff, dir string) (restore func(), err error) {
	creds := csi.Credentials{Env: h.Env, Files: h.Files}
	if len(creds.Files) > 0 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("sidecar: credentials dir: %w", err)
		}
		for name, b := range creds.Files {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), b, 0o600); err != nil {
				return nil, fmt.Errorf("sidecar: write credential %s: %w", name, err)
			}
		}
	}
	type prev struct {
		v   string
		set bool
	}
	old := map[string]prev{}
	for _, kv := range creds.Environ(dir) {
		k, v, _ := strings.Cut(kv, "=")
		ov, ok := os.LookupEnv(k)
		old[k] = prev{ov, ok}
		os.Setenv(k, v)
	}
	return func() {
		for k, p := range old {
			if p.set {
				os.Setenv(k, p.v)
			} else {
				os.Unsetenv(k)
			}
		}
	}, nil
}
