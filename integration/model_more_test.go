package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// The calls a run plays with modelRun.more (unless STRATA_MODEL_MORE=0)
// beside truncations by path and fsyncs of directories: restarts of the
// mount, and writes by a child process.

// restartMount closes every descriptor (a mount cannot go while they are
// open), then unmounts or kills the mount with SIGKILL, and mounts the
// bucket again on the same cache dir: every call before returned, so
// the new mount must hold what local disk holds.
func (r *modelRun) restartMount() string {
	if r.restart == nil {
		return ""
	}
	if d := r.closeAll(); d != "" {
		return d
	}
	kill := r.rng.IntN(2) == 0
	r.log = append(r.log, fmt.Sprintf("restart the mount (kill -9: %v)", kill))
	mnt, err := r.restart(kill)
	if err != nil {
		return fmt.Sprintf("restart (kill -9: %v): %v", kill, err)
	}
	r.mnt = mnt
	return ""
}

// childWrite has a child process (dd) write b at off through a dup of
// fd it inherits (one write in four with more), and exit while the run keeps the descriptor
// open: the forked writer of a checkpoint. Its exit closes its copy
// (a FLUSH from the process that wrote); the run's close comes later.
func (r *modelRun) childWrite(fd fdPair, b []byte, off int64) string {
	what := fmt.Sprintf("child pwrite(fd %d %s, %d bytes at %d)", fd.id, fd.path, len(b), off)
	return r.both(what, func(root string) (string, error) {
		// The child gets a dup as its stdout (exec needs an *os.File, and
		// one made of fd itself would close it when collected).
		dup, err := unix.FcntlInt(uintptr(fd.of(root == r.local)), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		out := os.NewFile(uintptr(dup), "inherited")
		defer out.Close()
		cmd := exec.Command("dd", fmt.Sprintf("bs=%d", len(b)), "count=1", "iflag=fullblock",
			"oflag=seek_bytes", fmt.Sprintf("seek=%d", off), "conv=notrunc", "status=none")
		cmd.Stdin, cmd.Stdout = bytes.NewReader(b), out
		if err := cmd.Run(); err != nil {
			// dd's message names the errno; the exit status alone is
			// compared ("write error: Bad file descriptor" and the like
			// give the same status on both sides).
			return "dd failed", nil
		}
		return "", nil
	})
}
