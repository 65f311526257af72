package mount

import (
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/writeback"
)

// startWrites turns the write path on, unless the mount is read-only or
// the backend takes no writes (then the mount is read-only, said once).
func startWrites(s *Mount) error {
	if s.cfg.ReadOnly {
		return nil
	}
	if _, ok := s.be.(backend.Writer); !ok {
		s.log.Warn("the source takes no writes; mounting read-only", "source", s.src.String())
		s.cfg.ReadOnly = true
		return nil
	}
	o := writeback.DefaultOptions()
	o.Mode = writeback.Mode(s.cfg.Write.Upload)
	o.Concurrency = s.cfg.Write.UploadConcurrency
	o.PartSize = int64(s.cfg.Write.UploadPartSize)
	o.Delay = s.cfg.Write.UploadDelay
	o.Logger = s.log
	wb, err := writeback.New(s.store, s.be, o, s.meta)
	if err != nil {
		return err
	}
	s.wb = wb
	s.fsys.EnableWrites(wb, s.be)
	return nil
}

// drainUploads waits, at unmount, for uploads still pending, so a job that
// ends with its last checkpoint still uploading loses nothing, and for the
// take-downs under way, so that a file deleted while its upload was on its
// way is out of the bucket too. A second SIGTERM or SIGINT stops waiting;
// what is left stays journaled and resumes at the next mount on this
// cache dir.
func drainUploads(s *Mount) {
	if s.wb == nil {
		return
	}
	sum := s.wb.Summary()
	if sum.Pending == 0 && sum.TakingDown == 0 {
		return
	}
	s.log.Info("waiting for pending uploads and take-downs before exiting (signal again to stop waiting)", "files", sum.Pending, "bytes", sum.PendingBytes, "take_downs", sum.TakingDown)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	done := make(chan struct{})
	go func() {
		_, _ = s.wb.WaitAll(ctx) // the outcome is read from Summary below
		close(done)
	}()
	for {
		select {
		case <-done:
			if left := s.wb.Summary(); left.Pending > 0 || left.TakingDown > 0 || len(left.Failed) > 0 {
				s.log.Warn("uploads left for the next mount", "pending", left.Pending, "take_downs", left.TakingDown, "failed", len(left.Failed))
			}
			return
		case <-tick.C:
			left := s.wb.Summary()
			s.log.Info("still uploading", "files", left.Pending, "bytes", left.PendingBytes, "take_downs", left.TakingDown)
		}
	}
}
