package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNamespaceNotInterruptedBySignals: readdir and stat of a mount whose
// every lookup and listing asks the bucket (--metadata-ttl 0) never
// return EINTR to a thread that receives signals it handles (SA_RESTART):
// the Go runtime's SIGURG, Python's SIGCHLD from DataLoader workers. The
// kernel turns such a signal into a FUSE INTERRUPT; answering it with
// EINTR reaches programs that do not expect it from a file system (a raw
// getdents loop, as go-fuse's posixtest ReadDirConsistency has, failed
// with "interrupted system call").
func TestNamespaceNotInterruptedBySignals(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := map[string][]byte{}
	for i := range 1500 {
		files[fmt.Sprintf("many/f%04d", i)] = []byte("x")
	}
	put(t, srv.writer(t, bucket), files)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--metadata-ttl", "0")
	dir := filepath.Join(m.dir, "many")
	for round := range 15 {
		n, err := underSignals(func() (int, error) {
			fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return 0, fmt.Errorf("open: %w", err)
			}
			defer unix.Close(fd)
			buf := make([]byte, 64<<10)
			total := 0
			for {
				k, err := unix.Getdents(fd, buf)
				if err != nil {
					return total, fmt.Errorf("getdents: %w", err)
				}
				if k == 0 {
					break
				}
				total += k
			}
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(dir, fmt.Sprintf("f%04d", round)), &st); err != nil {
				return total, fmt.Errorf("stat: %w", err)
			}
			return total, nil
		})
		if err != nil {
			t.Fatalf("round %d, after %d bytes of entries, signals arriving: %v", round, n, err)
		}
	}
}

// underSignals runs fn on a locked thread that gets a SIGURG (handled by
// the Go runtime, SA_RESTART) every 200 µs until fn returns.
func underSignals(fn func() (int, error)) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := os.Getpid(), unix.Gettid()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = unix.Tgkill(pid, tid, unix.SIGURG) // the thread lives until fn returns
			}
		}
	}()
	n, err := fn()
	close(stop)
	<-done
	return n, err
}

// TestMkdirNotInterruptedBySignals: mkdir(2) and a create under signals
// the caller handles never return EINTR (local disk never does). Mkdir
// sent its directory marker with the request's context, which the FUSE
// INTERRUPT of such a signal cancels (found by
// TestRandomCallsMatchLocalDisk on the GCS emulator).
func TestMkdirNotInterruptedBySignals(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	m := startMount(t, srv, srv.source(srv.newBucket(t), ""), "")
	n, err := underSignals(func() (int, error) {
		for i := range 40 {
			d := filepath.Join(m.dir, fmt.Sprintf("d%02d", i))
			if err := unix.Mkdir(d, 0o755); err != nil {
				return i, fmt.Errorf("mkdir: %w", err)
			}
			fd, err := unix.Open(filepath.Join(d, "f"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return i, fmt.Errorf("create: %w", err)
			}
			unix.Close(fd)
		}
		return 40, nil
	})
	if err != nil {
		t.Fatalf("after %d directories, signals arriving: %v", n, err)
	}
}
