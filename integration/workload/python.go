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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The Python programs the benchmark runs (python/*.py): the DataLoader
// epoch and the JPEG ImageFolder generator.
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
		return "", fmt.Errorf("%w: %s: %v: %s", ErrNoTorch, Python(), err, lastLine(string(out)))
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

// runPython runs an embedded program with args in its own process and
// decodes the JSON line it prints last into out; the end of its stderr is
// in the error on failure. The program and its children (DataLoader
// workers, a generator's pool) run in a process group of their own, killed
// whole on cancellation.
func runPython(ctx context.Context, name string, out any, args ...string) error {
	path, err := writeScript(name)
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, Python(), append([]string{path}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		// Workers left behind by a crash would hold the mount busy.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("workload: %s: %w", name, ctx.Err())
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "ModuleNotFoundError") {
			return fmt.Errorf("%w: %s: %s", ErrNoTorch, Python(), lastLine(msg))
		}
		return fmt.Errorf("workload: %s %s: %w: %s", Python(), name, err, tail(msg, 2000))
	}
	line := lastLine(stdout.String())
	if err := json.Unmarshal([]byte(line), out); err != nil {
		return fmt.Errorf("workload: %s printed %q: %w", name, shortText(line, 200), err)
	}
	return nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func shortText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
