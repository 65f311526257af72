package mount

import (
	"context"
	"strings"
	"time"

	"github.com/stratafs/strata/internal/metrics"
	"github.com/stratafs/strata/internal/warm"
)

// startBackground starts what a mount does on its own once it serves:
// warming a prefix (--warm-on-mount), and the upload-queue gauge.
func startBackground(s *Mount) {
	if s.wb != nil {
		registerUploadQueue(s, func() metrics.UploadQueue {
			sum := s.wb.Summary()
			q := metrics.UploadQueue{Objects: int64(sum.Pending), Bytes: sum.PendingBytes}
			if !sum.Oldest.IsZero() {
				q.OldestAge = time.Since(sum.Oldest)
			}
			return q
		})
	}
	prefix := s.cfg.Ops.WarmOnMount
	if prefix == "" {
		return
	}
	prefix = strings.TrimPrefix(prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopBg = cancel
	job := s.WarmJob(warm.Request{Prefix: prefix, Concurrency: s.cfg.Ops.WarmConcurrency})
	s.bgDone = make(chan struct{})
	go func() {
		defer close(s.bgDone)
		s.log.Info("warming in the background", "prefix", "/"+prefix)
		last := time.Now()
		p, err := job.Run(ctx, func(p warm.Progress) {
			if time.Since(last) > 30*time.Second {
				last = time.Now()
				s.log.Info("warming", "objects", p.DoneObjects, "of", p.Objects, "bytes", p.DoneBytes)
			}
		})
		if err != nil && ctx.Err() == nil {
			s.log.Warn("warming stopped", "err", err, "objects", p.DoneObjects)
			return
		}
		s.log.Info("warming done", "objects", p.DoneObjects, "bytes", p.DoneBytes, "already_cached", p.Skipped, "failed", p.Failed, "failed_paths", p.FailedPaths)
	}()
}

// stopBackground cancels background work and waits for it.
func stopBackground(s *Mount) {
	if s.stopBg != nil {
		s.stopBg()
		<-s.bgDone
	}
}
