package testserver

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is a test server's child process: started, watched, stopped.
// MinIO and FakeGCS each hold one.
type process struct {
	mu   sync.Mutex // guards cmd and done; never held while waiting on the process
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// start starts cmd, which dies with the test binary (a timeout panic must
// not leave a server behind), and returns a channel closed when it exits.
func (p *process) start(cmd *exec.Cmd) (<-chan struct{}, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return done, nil
}

// running reports whether the process is up (started and not stopped).
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
// Stopping a stopped process does nothing.
func (p *process) stop(name string, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process handles it
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("testserver: %s pid %d did not exit after SIGKILL", name, cmd.Process.Pid)
	}
}

// signal sends sig to the process, if it runs.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	return p.cmd.Process.Signal(sig)
}
