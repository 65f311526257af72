package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// WorkerArg is the hidden first argument that turns a binary using this
// package into a reader process (see MaybeRunWorker).
const WorkerArg = "__strata-workload-worker"

// Operations a worker performs.
const (
	OpReadFiles = "read"  // open, read whole with BufSize reads, close each path
	OpPread     = "pread" // Count preads of Size bytes at random aligned offsets of Path
	OpWalk      = "walk"  // ls -lR: readdir every directory under Root, lstat every entry
)

// Task is what one worker process does.
type Task struct {
	Op string `json:"op"`
	// OpReadFiles: Paths in order; Sizes and SHA256 (optional, parallel
	// to Paths) are checked; BufSize is the read(2) size.
	Paths   []string `json:"paths,omitempty"`
	Sizes   []int64  `json:"sizes,omitempty"`
	SHA256  []string `json:"sha256,omitempty"`
	BufSize int      `json:"buf_size,omitempty"`
	// OpPread: Count reads of Size bytes in Path at offsets drawn from Seed.
	Path  string `json:"path,omitempty"`
	Size  int    `json:"size,omitempty"`
	Count int    `json:"count,omitempty"`
	Seed  uint64 `json:"seed,omitempty"`
	// OpWalk: the tree's root.
	Root string `json:"root,omitempty"`
	// MaxDuration stops the task early (Truncated in the result); 0 means
	// no cap.
	MaxDuration time.Duration `json:"max_duration,omitempty"`
}

// WorkerResult is what one worker reports: counts, its own start and end
// (Unix ns, one clock for all processes on the machine) and one latency per
// operation.
type WorkerResult struct {
	Ops       int64   `json:"ops"`
	Bytes     int64   `json:"bytes"`
	Verified  int64   `json:"verified,omitempty"`
	StartNS   int64   `json:"start_ns"`
	EndNS     int64   `json:"end_ns"`
	LatNS     []int64 `json:"lat_ns"`
	Truncated bool    `json:"truncated,omitempty"`
	Err       string  `json:"err,omitempty"`
}

// MaybeRunWorker runs the worker and exits if this process was started as
// one (os.Args[1] == WorkerArg); otherwise it returns at once. Call it
// first in main and in TestMain.
func MaybeRunWorker() {
	if len(os.Args) > 1 && os.Args[1] == WorkerArg {
		os.Exit(serveWorker(os.Stdin, os.Stdout))
	}
}

// serveWorker speaks the worker side of the protocol: read one Task as a
// JSON line, prepare, print "ready", wait for "go", run, print the result
// as JSON.
func serveWorker(in io.Reader, out io.Writer) int {
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: read task: %v\n", err)
		return 2
	}
	var t Task
	if err := json.Unmarshal(line, &t); err != nil {
		fmt.Fprintf(os.Stderr, "worker: decode task: %v\n", err)
		return 2
	}
	run, err := prepare(t)
	if err != nil {
		res := WorkerResult{Err: err.Error()}
		_ = json.NewEncoder(out).Encode(res)
		return 1
	}
	fmt.Fprintln(out, "ready")
	goLine, err := br.ReadString('\n')
	if err != nil || strings.TrimSpace(goLine) != "go" {
		fmt.Fprintf(os.Stderr, "worker: expected go, got %q (%v)\n", goLine, err)
		return 2
	}
	res := run()
	if err := json.NewEncoder(out).Encode(res); err != nil {
		fmt.Fprintf(os.Stderr, "worker: write result: %v\n", err)
		return 2
	}
	return 0
}

// worker is one started reader process on the parent side.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

// RunWorkers starts one process per task (re-executing this binary), lets
// them all prepare, starts them together and returns their results. The
// first failure is returned after every process has been reaped.
func RunWorkers(ctx context.Context, tasks []Task) ([]WorkerResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("workload: workers: %w", err)
	}
	return runWorkers(ctx, []string{exe, WorkerArg}, tasks)
}

// runWorkers runs one process of argv per task (a Go worker, or
// python/readfiles.py, which speaks the same protocol).
func runWorkers(ctx context.Context, argv []string, tasks []Task) ([]WorkerResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := make([]*worker, 0, len(tasks))
	defer func() {
		for _, w := range workers {
			_ = w.stdin.Close()
			_ = w.cmd.Wait()
		}
	}()
	for i, t := range tasks {
		w, err := startWorker(ctx, argv, t)
		if err != nil {
			return nil, fmt.Errorf("workload: worker %d: %w", i, err)
		}
		workers = append(workers, w)
	}
	for i, w := range workers {
		line, err := w.stdout.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			return nil, fmt.Errorf("workload: worker %d not ready: %s", i, w.failure(line, err))
		}
	}
	for i, w := range workers {
		if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
			return nil, fmt.Errorf("workload: worker %d: start: %w", i, err)
		}
	}
	results := make([]WorkerResult, len(workers))
	var firstErr error
	for i, w := range workers {
		line, err := w.stdout.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &results[i])
		}
		if err != nil {
			firstErr = errors.Join(firstErr, fmt.Errorf("workload: worker %d: %s", i, w.failure(string(line), err)))
			continue
		}
		if results[i].Err != "" {
			firstErr = errors.Join(firstErr, fmt.Errorf("workload: worker %d: %s", i, results[i].Err))
		}
	}
	if firstErr == nil {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("workload: workers: %w", err)
		}
	}
	return results, firstErr
}

func startWorker(ctx context.Context, argv []string, t Task) (*worker, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// A worker's own complaints (a panic, say) go straight to our stderr.
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &worker{cmd: cmd, stdin: stdin, stdout: bufio.NewReaderSize(stdout, 1<<20)}
	b, err := json.Marshal(t)
	if err == nil {
		_, err = w.stdin.Write(append(b, '\n'))
	}
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return w, nil
}

// failure describes what a worker said when it did not follow the
// protocol.
func (w *worker) failure(line string, err error) string {
	msg := strings.TrimSpace(line)
	var res WorkerResult
	if json.Unmarshal([]byte(msg), &res) == nil && res.Err != "" {
		msg = res.Err
	}
	if err != nil {
		msg = strings.TrimSpace(msg + " " + err.Error())
	}
	return msg
}
