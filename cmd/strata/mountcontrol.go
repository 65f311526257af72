package main

import (
	"context"

	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/warm"
)

// startControl serves the mount's control socket.
func startControl(s *server) (*control.Server, error) {
	return control.Listen(s.cfg.CacheDir, control.Hello{Source: s.src.String(), Mountpoint: s.mnt}, s.handleControl, s.log)
}

// handleControl does what a control-socket client asks of the mount.
func (s *server) handleControl(ctx context.Context, req control.Request, progress func(any)) (any, error) {
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
