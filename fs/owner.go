package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache/writeback"
)

// Who closes a file decides whether the close publishes it. FUSE sends a
// FLUSH on every close() of every descriptor: a forked child dropping its
// inherited copy (close, exit, exec of a close-on-exec descriptor) sends
// one exactly like the writer's own last close. What tells them apart is
// the process: measured on Linux 6.18, a WRITE carries no lock owner
// (FUSE_WRITE_LOCKOWNER is only set for direct I/O), and both WRITE and
// FLUSH carry the calling thread's id, not the process's. So a request's
// owner is the thread group of its thread, read from /proc: threads of one
// process are one owner, a forked child another.
//
// A caller in another pid namespace (the Kubernetes sidecar mode) comes
// with pid 0: every such request is the same unknown owner, and a close
// publishes whatever the file holds, as before.

// owner is a process (thread group id), or 0 when unknown.
type owner int

// noOwner stands for no process: a change no close publishes by itself.
const noOwner owner = -1 << 62

// ownerCache maps thread ids to their process, so that /proc is read once
// per thread and not per 1 MiB write. Guarded by the node's mu.
type ownerCache map[uint32]owner

// callerPid is the thread id FUSE gives for the request.
func callerPid(ctx context.Context) uint32 {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Pid
	}
	return 0
}

// tgidOf reads the process of thread tid from /proc; 0 if unknown.
func tgidOf(tid uint32) owner {
	if tid == 0 {
		return 0
	}
	b, err := readProc(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return owner(-int(tid)) // gone already (or in execve): the thread stands for itself
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return owner(n)
			}
		}
	}
	return owner(-int(tid))
}

// procReadWait bounds a read of another task's /proc file. A task in the
// middle of execve closes its close-on-exec descriptors holding a lock
// that a read of its /proc/PID/stat waits for (measured on Linux 6.18):
// the FLUSH of an inherited descriptor of a file on the mount then waits
// for the daemon, and the daemon's read for the exec, forever.
const procReadWait = 50 * time.Millisecond

// errProcBusy: the /proc file did not answer within procReadWait.
var errProcBusy = errors.New("fs: /proc read timed out (the task is in execve)")

// readProc reads a /proc file of another task, giving up after
// procReadWait (the read then finishes on its own, once the task's exec
// goes on, and its result is dropped).
func readProc(path string) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := os.ReadFile(path)
		ch <- result{b, err}
	}()
	t := time.NewTimer(procReadWait)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-t.C:
		return nil, errProcBusy
	}
}

// Task flags of /proc/PID/stat (include/linux/sched.h).
const (
	pfExiting  = 0x4
	pfSignaled = 0x400
)

// killedBy reports the signal that is killing thread tid, if it is dying
// of one: a FLUSH sent from the exit of a killed writer (kill -9, a crash,
// Ctrl-C) must not publish the half-written file. A process that exits
// normally without closing its files (`cmd > file`) is not killed.
func killedBy(tid uint32) int {
	if tid == 0 {
		return 0
	}
	b, err := readProc(fmt.Sprintf("/proc/%d/stat", tid))
	if err != nil {
		return 0 // gone, or in execve: not dying of a signal
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	// Fields after the command: state is field 3, flags field 9,
	// exit_code field 52 (proc(5)).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 50 {
		return 0
	}
	flags, err := strconv.ParseUint(f[9-3], 10, 64)
	if err != nil || flags&pfExiting == 0 || flags&pfSignaled == 0 {
		return 0
	}
	// The exit code is set before the task's files are released (do_exit),
	// so a FLUSH from its exit sees it. A thread taken down by its
	// process's normal exit (exit_group sends the other threads SIGKILL)
	// is signaled too, with the group's exit status: code&0x7f is 0, and
	// that process was not killed.
	code, err := strconv.Atoi(f[52-3])
	if err != nil {
		return 0
	}
	return code & 0x7f
}

// markWrote records that process o wrote to session st (the session
// keeps its writers: writeback.Staging.NoteWriter).
func markWrote(st *writeback.Staging, o owner) { st.NoteWriter(int64(o)) }

// wroteTo reports whether process o wrote to session st.
func wroteTo(st *writeback.Staging, o owner) bool { return st.WrittenBy(int64(o)) }

// ownerOf returns the process of thread tid, cached until the session's
// commit (a thread id can be reused).
func (n *fileNode) ownerOf(tid uint32) owner {
	w := n.ws()
	n.mu.Lock()
	o, ok := w.tids[tid]
	n.mu.Unlock()
	if ok {
		return o
	}
	o = tgidOf(tid)
	n.mu.Lock()
	if w.tids == nil {
		w.tids = ownerCache{}
	}
	w.tids[tid] = o
	n.mu.Unlock()
	return o
}
