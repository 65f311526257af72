package workload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The Python programs the benchmark runs (python/*.py): the DataLoader
// epoch, the JPEG ImageFolder generator and the checkpoint writer.
//
//go:embed python/*.py
var pythonFS embed.FS

// ErrNoTorch means the Python interpreter lacks PyTorch, torchvision or
// Pillow.
var ErrNoTorch = errors.New("workload: python3-torch, python3-torchvision or python3-pil not installed (`make bench-tools` installs them)")

// Python is the interpreter that runs the Python programs:
// $STRATA_BENCH_PYTHON, else Debian's /usr/bin/python3 (where `make
// bench-tools` installs python3-torch; a python3 earlier on PATH, from
// pyenv say, may lack it).
func Python() string {
	if p := os.Getenv("STRATA_BENCH_PYTHON"); p != "" {
		return p
	}
	return "/usr/bin/python3"
}

// TorchVersions checks that Python imports torch, torchvision and PIL and
// returns their versions ("torch 1.13.1, torchvision 0.14.1, Pillow
// 9.4.0"). The error wraps ErrNoTorch when an import fails.
func TorchVersions(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	const probe = "import torch, torchvision, PIL; print(f'torch {torch.__version__}, torchvision {torchvision.__version__}, Pillow {PIL.__version__}')"
	out, err := exec.CommandContext(ctx, Python(), "-c", probe).CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("workload: %s: %w", Python(), ctx.Err())
		}
		if msg := lastLine(string(out)); msg != "" {
			err = fmt.Errorf("%v: %s", err, msg)
		}
		return "", fmt.Errorf("%w: %s: %v", ErrNoTorch, Python(), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// pythonScript returns the embedded program name's source.
func pythonScript(name string) ([]byte, error) {
	b, err := pythonFS.ReadFile("python/" + name)
	if err != nil {
		return nil, fmt.Errorf("workload: no python program %s: %w", name, err)
	}
	return b, nil
}

// scriptHash identifies a program's version (16 hex digits).
func scriptHash(name string) string {
	b, err := pythonScript(name)
	if err != nil {
		panic(err) // embedded at build time
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// writeScript puts the program in a directory of its own under the
// temporary directory, named by its hash, and returns its path.
func writeScript(name string) (string, error) {
	b, err := pythonScript(name)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "strata-python-"+scriptHash(name))
	path := filepath.Join(dir, name)
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("workload: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".*")
	if err != nil {
		return "", fmt.Errorf("workload: %w", err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("workload: write %s: %w", path, err)
	}
	return path, nil
}

// pyProc is a running embedded program: its own process group (the
// program and its children: DataLoader workers, a generator's pool), killed
// whole on ctx's end or by kill; the end of its stderr is kept for errors.
type pyProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailBuffer

	waitOnce sync.Once
	done     chan struct{}
	waitErr  error // valid once done is closed
}

func startPython(ctx context.Context, name string, args ...string) (*pyProc, error) {
	path, err := writeScript(name)
	if err != nil {
		return nil, err
	}
	p := &pyProc{name: name, stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, Python(), append([]string{path}, args...)...)
	cmd.Stderr = p.stderr
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("workload: %s: %w", name, err)
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, fmt.Errorf("workload: %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %v", ErrNoTorch, err)
		}
		return nil, fmt.Errorf("workload: %s %s: %w", Python(), name, err)
	}
	p.cmd = cmd
	return p, nil
}

// wait reaps the program once; the channel closes when it has exited.
func (p *pyProc) wait() <-chan struct{} {
	p.waitOnce.Do(func() {
		go func() {
			p.waitErr = p.cmd.Wait()
			close(p.done)
		}()
	})
	return p.done
}

// kill ends the program's whole process group.
func (p *pyProc) kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// exit waits up to grace for the program to exit by itself, then kills it
// and what is left of its group (workers left behind would hold a mount
// busy), and returns its exit status.
func (p *pyProc) exit(grace time.Duration) error {
	select {
	case <-p.wait():
	case <-time.After(grace):
		p.kill()
		<-p.wait()
	}
	p.kill()
	return p.waitErr
}

// failure explains err, which came from the program's pipes, with its
// exit status and the end of its stderr (ErrNoTorch for a missing module).
func (p *pyProc) failure(err error) error {
	status := p.exit(5 * time.Second)
	msg := strings.TrimSpace(p.stderr.String())
	if strings.Contains(msg, "ModuleNotFoundError") {
		return fmt.Errorf("%w: %s: %s", ErrNoTorch, Python(), lastLine(msg))
	}
	return fmt.Errorf("%w (%s %s: %v): %s", err, Python(), p.name, status, msg)
}

// close ends the program's input and waits for it to finish.
func (p *pyProc) close() error {
	_ = p.stdin.Close()
	if err := p.exit(30 * time.Second); err != nil {
		return fmt.Errorf("workload: %s: %w: %s", p.name, err, strings.TrimSpace(p.stderr.String()))
	}
	return nil
}

// runPython runs an embedded program with args to its end and decodes the
// JSON line it prints last into out.
func runPython(ctx context.Context, name string, out any, args ...string) error {
	p, err := startPython(ctx, name, args...)
	if err != nil {
		return err
	}
	_ = p.stdin.Close()
	stdout, rerr := io.ReadAll(p.stdout)
	if status := p.exit(10 * time.Second); status != nil || rerr != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("workload: %s: %w", name, ctx.Err())
		}
		return p.failure(errors.Join(status, rerr))
	}
	line := lastLine(string(stdout))
	if err := json.Unmarshal([]byte(line), out); err != nil {
		return fmt.Errorf("workload: %s printed %q: %w", name, shortText(line, 200), err)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex // guards b
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func shortText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
