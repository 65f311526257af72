package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// TarShardsOpts configures python/tarshards.py: each epoch streams every
// .tar shard under Root with tarfile's "r|" mode, WebDataset style, in
// DataLoader workers.
type TarShardsOpts struct {
	Root string
	// Streams is the DataLoader's num_workers, each streaming one shard at
	// a time (default 4); BatchSize the samples per batch (default 64).
	Streams, BatchSize int
	// MaxDuration stops the epoch early (0: none); the summary is then
	// Truncated.
	MaxDuration time.Duration
}

// TarShardsResult is what the program reports about its epoch.
type TarShardsResult struct {
	Shards     int       `json:"shards"`
	Streams    int       `json:"streams"`
	Samples    int       `json:"samples"`
	Members    int       `json:"members"`
	Bytes      int64     `json:"bytes"`
	Seconds    float64   `json:"seconds"`
	BatchWaits []float64 `json:"batch_waits_s"`
	Truncated  bool      `json:"truncated"`
	Torch      string    `json:"torch"`
}

// Summary turns the epoch into a Summary: Ops are samples, Bytes the
// members' contents read, latencies the loop's waits per batch.
func (r TarShardsResult) Summary() Summary {
	s := Summary{Ops: int64(r.Samples), Bytes: r.Bytes, Elapsed: time.Duration(r.Seconds * float64(time.Second)),
		Procs: r.Streams, Truncated: r.Truncated}
	waits := make([]time.Duration, len(r.BatchWaits))
	for i, w := range r.BatchWaits {
		waits[i] = time.Duration(w * float64(time.Second))
	}
	slices.Sort(waits)
	s.P50, s.P99 = Percentile(waits, 50), Percentile(waits, 99)
	if len(waits) > 0 {
		s.Max = waits[len(waits)-1]
	}
	s.Note = fmt.Sprintf("%d samples (%d members) from %d shards, first batch after %s", r.Samples, r.Members,
		r.Shards, FormatLatency(firstWait(r.BatchWaits)))
	return s
}

// ShardContents is what WebDataset shards of the spec hold, as Generate
// writes them: samples per shard and the bytes of their members' contents
// per shard (a sample is a SampleSize ".jpg" and a short ".cls" label).
func (s WebDatasetSpec) ShardContents() (samples int, memberBytes int64) {
	// This mirrors writeShard's loop, where the archive's length so far
	// lacks the padding of the last .cls member (tar.Writer writes it with
	// the next header).
	const block, endOfArchive = 512, 1024
	var written int64
	for i := 0; ; i++ {
		cls := int64(len(fmt.Sprintf("%d\n", i%1000)))
		need := 2*block + roundUp(s.SampleSize, block) + roundUp(cls, block)
		if written+need+endOfArchive > s.ShardSize {
			return samples, memberBytes
		}
		if i > 0 {
			prev := int64(len(fmt.Sprintf("%d\n", (i-1)%1000)))
			written += roundUp(prev, block) - prev // the previous label's padding
		}
		written += 2*block + roundUp(s.SampleSize, block) + cls
		samples++
		memberBytes += s.SampleSize + cls
	}
}

// TarShards is a running python/tarshards.py --serve: one Python process,
// like a training job, that runs an epoch on request. Between epochs it
// holds nothing open on Root (its workers have exited), so the filesystem
// can be remounted.
type TarShards struct {
	o   TarShardsOpts
	py  *pyProc
	out *bufio.Reader
}

// StartTarShards starts the program (importing torch takes seconds) and
// waits until it is ready. The process lives until Close or until ctx
// ends.
func StartTarShards(ctx context.Context, o TarShardsOpts) (*TarShards, error) {
	if o.Streams <= 0 {
		o.Streams = 4
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 64
	}
	py, err := startPython(ctx, tarShardsScript, "--serve", "--root", o.Root, "--streams", strconv.Itoa(o.Streams),
		"--batch-size", strconv.Itoa(o.BatchSize))
	if err != nil {
		return nil, err
	}
	t := &TarShards{o: o, py: py, out: bufio.NewReader(py.stdout)}
	var ready struct {
		Ready bool `json:"ready"`
	}
	if err := readJSONLine(ctx, t.py, t.out, "tarshards", &ready); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// Epoch streams every shard once. Not for concurrent use.
func (t *TarShards) Epoch(ctx context.Context) (TarShardsResult, error) {
	req, err := json.Marshal(map[string]any{"max_seconds": t.o.MaxDuration.Seconds()})
	if err != nil {
		return TarShardsResult{}, err
	}
	if _, err := t.py.stdin.Write(append(req, '\n')); err != nil {
		return TarShardsResult{}, t.py.failure(fmt.Errorf("workload: tarshards: %w", err))
	}
	var r TarShardsResult
	err = readJSONLine(ctx, t.py, t.out, "tarshards", &r)
	return r, err
}

// Close ends the program (and its workers, if any are left).
func (t *TarShards) Close() error { return t.py.close() }

const tarShardsScript = "tarshards.py"
