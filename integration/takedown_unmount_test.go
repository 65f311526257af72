package integration

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestUnmountWaitsForATakeDown: a file deleted while its upload request
// is on its way lands in the bucket anyway, and its take-down is under way
// (refused with 503 for now) when the mount is unmounted. Unmount finishes
// pending uploads before the daemon exits (README, umount), and a
// take-down is the rest of a delete the user made: the daemon must wait
// for it too, so that the deleted file is out of the bucket once the
// daemon has exited. Before, with no upload pending, the daemon exited at
// once and left the object in the bucket until a next mount on the same
// cache dir, if any.
func TestUnmountWaitsForATakeDown(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		p, m, w, cacheDir := deletedInFlight(t, srv, func(p *lateUploadProxy) { p.refuse.Store(true) })
		key := "checkpoint-3/model.bin"
		if _, _, err := bucketSHA(t, w, key); err != nil {
			t.Fatalf("the late object, while deletes are refused: %v", err)
		}
		pid := m.pid
		if out, err := exec.Command("umount", m.dir).CombinedOutput(); err != nil {
			t.Fatalf("umount: %v %s", err, out)
		}
		// Deletes stay refused until the daemon says it waits, or exits.
		exited := func() bool { return syscall.Kill(pid, 0) != nil }
		for deadline := time.Now().Add(10 * time.Second); !exited() && !strings.Contains(logTail(cacheDir), "before exiting"); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon neither exited nor said it waits, 10 s after umount:\n%s", logTail(cacheDir))
			}
		}
		early := exited()
		p.refuse.Store(false)
		for deadline := time.Now().Add(30 * time.Second); !exited(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon still runs 30 s after deletes were accepted again:\n%s", logTail(cacheDir))
			}
		}
		m.pid = 0
		_, _, err := bucketSHA(t, w, key)
		if early || !errors.Is(err, backend.ErrNotExist) {
			t.Fatalf("the daemon exited (before deletes were accepted again: %v) with the deleted file's object in the bucket: %v (nil: still there)\n%s", early, err, logTail(cacheDir))
		}
	})
}
