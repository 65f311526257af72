package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// BinDir is where `make build` and `make tools` put binaries:
// $STRATA_BIN_DIR if set, else <repo>/bin found by walking up from the
// working directory to go.mod, else the directory of this executable.
func BinDir() string {
	if d := os.Getenv("STRATA_BIN_DIR"); d != "" {
		return d
	}
	if dir, err := os.Getwd(); err == nil {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.Join(dir, "bin")
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if exe, err := os.Executable(); err == nil {
		return filepath.Dir(exe)
	}
	return "bin"
}

// ErrNoTool means a required binary is not installed.
var ErrNoTool = errors.New("workload: tool not installed")

// Tool returns the path of name in BinDir, or on $PATH.
func Tool(name string) (string, error) {
	p := filepath.Join(BinDir(), name)
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: %s (not in %s nor on PATH)", ErrNoTool, name, BinDir())
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("workload: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Proc is a child process (a server or a FUSE daemon) with its output in a
// log file. It is killed if this process dies (Pdeathsig).
type Proc struct {
	Name    string
	LogPath string

	mu   sync.Mutex // guards cmd and done; never held while waiting
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid once done is closed
}

// StartProc starts bin with args and env (added to ours; an entry "!KEY"
// removes KEY instead), logging stdout and stderr to logPath.
func StartProc(name, logPath string, env []string, bin string, args ...string) (*Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("workload: start %s: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = mergeEnv(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("workload: start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// mergeEnv returns base with extra appended, leaving out the variables
// named by "!KEY" entries of extra.
func mergeEnv(base, extra []string) []string {
	drop := map[string]bool{}
	var add []string
	for _, kv := range extra {
		if k, ok := strings.CutPrefix(kv, "!"); ok {
			drop[k] = true
			continue
		}
		add = append(add, kv)
	}
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return append(out, add...)
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and its status.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Wait waits up to timeout for the process to exit by itself.
func (p *Proc) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
// Stopping an exited process does nothing.
func (p *Proc) Stop(grace time.Duration) error {
	if done, _ := p.Exited(); done {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if p.Wait(grace) {
		return nil
	}
	_ = p.cmd.Process.Kill()
	if p.Wait(10 * time.Second) {
		return nil
	}
	return fmt.Errorf("workload: %s (pid %d) did not exit after SIGKILL", p.Name, p.Pid())
}

// LogTail returns the last n bytes of the log, for error messages.
func (p *Proc) LogTail(n int64) string { return fileTail(p.LogPath, n) }

func fileTail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// awaitHTTP waits until url answers 200 OK, for a server p just started.
// If p exits, timeout passes or ctx ends first, it stops p and returns an
// error carrying the tail of p's log.
func awaitHTTP(ctx context.Context, p *Proc, name, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if done, _ := p.Exited(); done || time.Now().After(deadline) || ctx.Err() != nil {
			_ = p.Stop(5 * time.Second)
			return fmt.Errorf("workload: %s did not start\n%s", name, p.LogTail(2048))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
