package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The mount command returns once the filesystem is ready and keeps serving
// in the background. Go cannot fork, so the parent re-executes itself in
// the foreground mode with a pipe; the child reports "ok" or the error on
// it once it has mounted (or failed to), and the parent exits accordingly.

const readyFdEnv = "STRATA_READY_FD"

// daemonize starts the serving child and waits for its verdict.
func daemonize(args []string, logFile string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("log file %s: %w", logFile, err)
	}
	defer log.Close()
	cmd := exec.Command(exe, append(args, "--foreground")...)
	cmd.Env = append(os.Environ(), readyFdEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	line := make(chan string, 2)
	go func() {
		br := bufio.NewReader(r)
		for i := 0; i < 2; i++ { // an optional warning, then the verdict
			s, _ := br.ReadString('\n')
			line <- strings.TrimSpace(s)
			if !strings.HasPrefix(s, "warning ") {
				return
			}
		}
	}()
	select {
	case s := <-line:
		if w, ok := strings.CutPrefix(s, "warning "); ok { // then the verdict
			fmt.Fprintln(os.Stderr, "strata: warning: "+w)
			s = <-line
		}
		if s == "ok" {
			_ = cmd.Process.Release() // the mount runs on; this frees only our handle
			return nil
		}
		if msg, ok := strings.CutPrefix(s, "error "); ok {
			// Let it exit first: the caller may remove the cache dir it
			// created for this mount, which the child still has open.
			select {
			case err := <-exited:
				_ = err // the verdict says why it failed; its exit status adds nothing
			case <-time.After(10 * time.Second):
			}
			return errors.New(msg)
		}
		err := <-exited
		return fmt.Errorf("mount process exited (%v); see %s", err, logFile)
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("mount not ready after 10 minutes; see %s", logFile)
	}
}

// readyPipe is the child's end of the verdict pipe, if it was started by
// daemonize.
func readyPipe() *os.File {
	fd, err := strconv.Atoi(os.Getenv(readyFdEnv))
	if err != nil || fd < 3 {
		return nil
	}
	os.Unsetenv(readyFdEnv)
	return os.NewFile(uintptr(fd), "ready")
}

// reportWarning passes the parent a line to print before the verdict.
func reportWarning(p *os.File, w string) {
	if p != nil && w != "" {
		fmt.Fprintln(p, "warning "+strings.ReplaceAll(w, "\n", " "))
	}
}

// report tells the waiting parent how the mount went (once).
func report(p *os.File, err error) {
	if p == nil {
		return
	}
	if err == nil {
		fmt.Fprintln(p, "ok")
	} else {
		fmt.Fprintln(p, "error "+strings.ReplaceAll(err.Error(), "\n", " "))
	}
	p.Close()
}
