package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// checkpoint is issue #5's benchmark: one file written with 1 MiB writes
// and closed, the way torch.save writes a checkpoint. What the training
// loop waits for is the write+close phase; the in-bucket phase runs from
// open until the object is whole in the bucket (polled with HEAD). Local
// disk writes the same file with and without fsync (strata's async close
// fsyncs its staging file, so the fsync'd write is the like-for-like
// comparison).
type checkpoint struct{}

// Phase names shared with the targets.
const (
	phaseWriteClose = "write+close"
	phaseWriteFsync = "write+fsync+close"
	phaseInBucket   = "in bucket"
)

func (checkpoint) Name() string   { return "checkpoint" }
func (checkpoint) Unit() string   { return "MB/s" }
func (checkpoint) Writable() bool { return true }

func (checkpoint) Title(c Config) string {
	return fmt.Sprintf("Checkpoint write: one %s file, 1 MiB writes, then close (rate = size / time the application waited)",
		workload.FormatSize(c.Scale.CheckpointSize))
}

// The checkpoint reads nothing: its prefix is an empty scratch part.
func (checkpoint) AddData(*workload.Dataset, Scale) {}
func (checkpoint) Prefix(Scale) string              { return "checkpoint" }

func (w checkpoint) RunFS(ctx context.Context, p *Phases, fs FS) error {
	e := p.Env()
	size := e.Cfg.Scale.CheckpointSize
	prefix := w.Prefix(e.Cfg.Scale)
	client := workload.NewS3Client(e.s3(e.MinIO.Endpoint))
	local := p.sys.Role == RoleLocal
	var inBucket workload.Summary // of the last write+close run
	write := func(fsync bool) phaseFunc {
		return func(ctx context.Context, rep int) (workload.Summary, error) {
			// A name of its own per system, latency and run: the bucket is
			// shared, and a peer may not have deleted an earlier run's
			// object yet (the in-bucket poll would find it at once).
			name := fmt.Sprintf("ckpt-%s-%s-%d-%d.pt", p.sys.Name, p.lat, rep, time.Now().UnixNano())
			path := filepath.Join(fs.Root(), name)
			start := time.Now()
			r, err := workload.WriteFile(ctx, path, size, 1<<20, fsync, uint64(rep)+1)
			s := r.Summary()
			s.Note = fmt.Sprintf("close() %s", workload.FormatLatency(r.Close))
			if fsync {
				s.Note = fmt.Sprintf("fsync() %s, %s", workload.FormatLatency(r.Fsync), s.Note)
			}
			if err != nil {
				return s, err
			}
			if !local {
				seen, err := workload.WaitObject(ctx, client, e.Bucket(prefix), prefix+"/"+name, size, e.Cfg.Timeout)
				if err != nil {
					return s, err
				}
				inBucket = workload.Summary{Ops: 1, Bytes: size, Elapsed: seen.Sub(start), Procs: 1,
					Note: fmt.Sprintf("%s after close() returned", workload.FormatLatency(seen.Sub(start)-r.Elapsed))}
			}
			if err := os.Remove(path); err != nil {
				return s, fmt.Errorf("remove %s: %w", path, err)
			}
			return s, nil
		}
	}
	if err := p.Cold(ctx, phaseWriteClose, fs, mbPerSecond, write(false)); err != nil {
		return err
	}
	if local {
		return p.Cold(ctx, phaseWriteFsync, fs, mbPerSecond, write(true))
	}
	return p.Cold(ctx, phaseInBucket, nil, mbPerSecond, func(context.Context, int) (workload.Summary, error) {
		return inBucket, nil
	})
}

// RunClient: the GET client does not write.
func (checkpoint) RunClient(context.Context, *Phases, *workload.GetClient) error { return nil }
