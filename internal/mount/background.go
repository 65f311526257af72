package mount

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/internal/metrics"
	"github.com/stratafs/strata/internal/warm"
)

// startBackground starts what a mount does on its own once it serves:
// registering a restarted mount's recent cache files for passthrough,
// warming a prefix (--warm-on-mount), and the upload-queue gauge.
// stopBackground cancels the work and waits for it.
func startBackground(s *Mount) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	s.stopBg = func() {
		cancel()
		wg.Wait()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		keepRegistered(ctx, s)
	}()
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
	job := s.WarmJob(warm.Request{Prefix: prefix, Concurrency: s.cfg.Ops.WarmConcurrency})
	wg.Add(1)
	go func() {
		defer wg.Done()
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

// keepRegistered registers, once the cache's preload is done, the cache
// files of the recent objects it loaded with the kernel, as their first
// open would (fs.Mounted.KeepRegistered): after a restart the first
// epoch's opens find them registered, which for a CSI sidecar saves a
// round trip to the node plugin per file.
func keepRegistered(ctx context.Context, s *Mount) {
	if !s.mounted.Passthrough {
		return
	}
	start, kept := time.Now(), 0
	s.store.EachPreloaded(ctx, func(o *cache.Object) {
		if s.mounted.KeepRegistered(o) {
			kept++
		}
	})
	if kept > 0 {
		s.log.Info("registered recent cache files for passthrough", "files", kept, "took", time.Since(start).Round(time.Millisecond))
	}
}

// stopBackground cancels background work and waits for it.
func stopBackground(s *Mount) {
	if s.stopBg != nil {
		s.stopBg()
		s.stopBg = nil
	}
}
