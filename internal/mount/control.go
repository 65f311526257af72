package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/warm"
)

// startControl serves the mount's control socket.
func startControl(s *Mount) (*control.Server, error) {
	return control.Listen(s.cfg.CacheDir, control.Hello{Source: s.src.String(), Mountpoint: s.mnt}, s.handleControl, s.log)
}

// handleControl does what a control-socket client asks of the mount.
func (s *Mount) handleControl(ctx context.Context, req control.Request, progress func(any)) (any, error) {
	switch req.Op {
	case "stats":
		return liveStats(s)
	case "warm":
		job, err := warmJobForMount(s, req)
		if err != nil {
			return nil, err
		}
		s.log.Info("control: warm", "source", req.Source, "prefix", job.Req.Prefix, "paths", len(job.Req.Paths))
		return job.Run(ctx, func(p warm.Progress) { progress(p) })
	case "verify":
		res, err := cachetools.Verify(ctx, s.store, 4, func(p cachetools.VerifyProgress) { p.Live = true; progress(p) })
		res.Live = true
		return res, err
	case "gc":
		return cachetools.GC(s.store), nil
	case "refresh":
		return refreshOnMount(ctx, s, req.Paths)
	}
	return nil, control.UnknownOp(req.Op)
}

// refreshOnMount is the control socket's "refresh": each path in turn;
// the first failure stops (the backend is unreachable, most likely).
func refreshOnMount(ctx context.Context, s *Mount, paths []string) (control.RefreshReply, error) {
	var out control.RefreshReply
	if s.fsys == nil {
		return out, errors.New("this process serves no mount")
	}
	if len(paths) == 0 {
		paths = []string{""}
	}
	for _, p := range paths {
		r, err := s.fsys.Refresh(ctx, p)
		if err != nil {
			return out, err
		}
		s.log.Info("refreshed", "path", "/"+r.Path, "state", r.State, "version", r.Version, "was", r.Was)
		out.Results = append(out.Results, r)
	}
	return out, nil
}

// liveStats is the control socket's answer to "stats".
func liveStats(s *Mount) (cachetools.Stats, error) {
	st := cachetools.Stats{
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

// warmJobForMount turns a control-socket warm request into a job on the
// running mount, whose source must contain the one asked for.
func warmJobForMount(s *Mount, req control.Request) (*warm.Job, error) {
	want, err := config.ParseSource(req.Source)
	if err != nil {
		return nil, err
	}
	if req.Endpoint != "" && req.Endpoint != s.cfg.EndpointURL {
		return nil, fmt.Errorf("this cache dir is mounted from %s with endpoint %q, not %q; use another --cache-dir", s.src, s.cfg.EndpointURL, req.Endpoint)
	}
	rel, ok := relativeSource(s.src, want)
	if !ok {
		return nil, fmt.Errorf("this cache dir is mounted from %s; %s is not under it (warm a source under it, or use another --cache-dir)", s.src, want)
	}
	r := warm.Request{Prefix: rel + req.Prefix, Concurrency: req.Concurrency}
	if r.Concurrency <= 0 || r.Concurrency > 4096 {
		r.Concurrency = s.cfg.Ops.WarmConcurrency
	}
	for _, p := range req.Paths {
		r.Paths = append(r.Paths, rel+strings.TrimPrefix(p, "/"))
	}
	return s.WarmJob(r), nil
}

// relativeSource returns the key prefix of want below mounted ("" or
// ending in "/"), if want is mounted or lies under it.
func relativeSource(mounted, want config.Source) (string, bool) {
	if mounted.Scheme != want.Scheme {
		return "", false
	}
	if want.Scheme == "file" {
		switch {
		case want.Path == mounted.Path:
			return "", true
		case strings.HasPrefix(want.Path, strings.TrimSuffix(mounted.Path, "/")+"/"):
			return strings.TrimPrefix(want.Path, strings.TrimSuffix(mounted.Path, "/")+"/") + "/", true
		}
		return "", false
	}
	if want.Bucket != mounted.Bucket || !strings.HasPrefix(want.Prefix, mounted.Prefix) {
		return "", false
	}
	return strings.TrimPrefix(want.Prefix, mounted.Prefix), true
}
