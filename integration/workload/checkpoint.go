package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Checkpointer is a running python/checkpoint.py: one Python process, like
// a training job, that saves and loads checkpoints on request with the
// real torch.save and torch.load, and writes the Hugging Face Trainer's
// checkpoint directories. It holds nothing open between requests, so the
// filesystem under it can be remounted.
type Checkpointer struct {
	py  *pyProc
	out *bufio.Reader
	// Torch is the version the program imported.
	Torch string
}

// SaveResult is one torch.save.
type SaveResult struct {
	// Close is the time until torch.save returned and the file was closed
	// (fsync'd first when asked): what the training loop waits for.
	Close time.Duration
	// Bytes is the file's size; Tensors the state dict's tensor count.
	Bytes   int64   `json:"bytes"`
	Tensors int     `json:"tensors"`
	CloseS  float64 `json:"close_s"`
}

// LoadResult is one torch.load.
type LoadResult struct {
	Load  time.Duration
	LoadS float64 `json:"load_s"`
	// Equal says every loaded tensor equals the one saved.
	Equal bool `json:"equal"`
	// SHA256 is the file's, read back through the filesystem.
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// HFResult is one Hugging Face Trainer checkpoint step.
type HFResult struct {
	Write, Rename, Rmtree time.Duration
	WriteS                float64 `json:"write_s"`
	RenameS               float64 `json:"rename_s"`
	RmtreeS               float64 `json:"rmtree_s"`
	// Files are checkpoint-N's files and sizes.
	Files map[string]int64 `json:"files"`
	// Removed are the checkpoints deleted, Checkpoints those left.
	Removed     []string `json:"removed"`
	Checkpoints []string `json:"checkpoints"`
}

// Bytes is the step's total written.
func (r HFResult) Bytes() int64 {
	var n int64
	for _, s := range r.Files {
		n += s
	}
	return n
}

// StartCheckpointer starts the program (importing torch takes seconds)
// and waits until it is ready. The process lives until Close or until ctx
// ends.
func StartCheckpointer(ctx context.Context) (*Checkpointer, error) {
	py, err := startPython(ctx, checkpointScript)
	if err != nil {
		return nil, err
	}
	c := &Checkpointer{py: py, out: bufio.NewReader(py.stdout)}
	var ready struct {
		Torch string `json:"torch"`
	}
	if err := c.call(ctx, nil, &ready); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.Torch = ready.Torch
	return c, nil
}

// Save runs torch.save of a state dict of about size bytes of float32
// tensors, deterministic from seed, to path; fsync before close when
// asked (the local-disk baseline).
func (c *Checkpointer) Save(ctx context.Context, path string, size int64, seed uint64, fsync bool) (SaveResult, error) {
	var r SaveResult
	err := c.call(ctx, map[string]any{"op": "save", "path": path, "size": size, "seed": seed, "fsync": fsync}, &r)
	r.Close = seconds(r.CloseS)
	return r, err
}

// Load runs torch.load of path and checks the tensors against those Save
// wrote with the same size and seed.
func (c *Checkpointer) Load(ctx context.Context, path string, size int64, seed uint64) (LoadResult, error) {
	var r LoadResult
	err := c.call(ctx, map[string]any{"op": "load", "path": path, "size": size, "seed": seed}, &r)
	r.Load = seconds(r.LoadS)
	if err == nil && !r.Equal {
		err = fmt.Errorf("workload: torch.load of %s: the tensors differ from those saved", path)
	}
	return r, err
}

// HF writes the Trainer's checkpoint step under root: about size bytes in
// tmp-checkpoint-step/, renamed to checkpoint-step, the oldest removed
// while more than keep remain.
func (c *Checkpointer) HF(ctx context.Context, root string, step int, size int64, seed uint64, fsync bool, keep int) (HFResult, error) {
	var r HFResult
	err := c.call(ctx, map[string]any{"op": "hf", "root": root, "step": step, "size": size, "seed": seed,
		"fsync": fsync, "keep": keep}, &r)
	r.Write, r.Rename, r.Rmtree = seconds(r.WriteS), seconds(r.RenameS), seconds(r.RmtreeS)
	return r, err
}

// call sends req (none when nil) and decodes the program's answer into
// out; ctx's end kills the program.
func (c *Checkpointer) call(ctx context.Context, req any, out any) error {
	if req != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("workload: checkpoint: %w", err)
		}
		if _, err := c.py.stdin.Write(append(b, '\n')); err != nil {
			return c.py.failure(fmt.Errorf("workload: checkpoint: %w", err))
		}
	}
	type line struct {
		b   []byte
		err error
	}
	ch := make(chan line, 1)
	go func() {
		b, err := c.out.ReadBytes('\n')
		ch <- line{b, err}
	}()
	var l line
	select {
	case l = <-ch:
	case <-ctx.Done():
		c.py.kill()
		<-ch
		return fmt.Errorf("workload: checkpoint: %w", ctx.Err())
	}
	if l.err != nil {
		return c.py.failure(fmt.Errorf("workload: checkpoint: %w", l.err))
	}
	if err := json.Unmarshal(l.b, out); err != nil {
		return fmt.Errorf("workload: checkpoint printed %q: %w", shortText(string(l.b), 200), err)
	}
	return nil
}

// Close ends the program.
func (c *Checkpointer) Close() error { return c.py.close() }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

const checkpointScript = "checkpoint.py"
