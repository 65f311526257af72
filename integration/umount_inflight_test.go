package integration

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// umountExitBound is README's bound for the daemon to exit after an
// unmount with reads of an endpoint that does not answer in flight (no
// upload pending): it does not wait out their timeouts.
const umountExitBound = 5 * time.Second

// TestUmountDuringReadsOfASilentEndpoint: a reader of a file not cached
// is killed while its GETs wait on an endpoint that answers nothing (a
// pod going away during an outage), and the mount is unmounted. umount
// returns at once; the daemon, which holds the cache dir until it exits
// (a new mount on it is refused meanwhile), must exit within
// umountExitBound rather than wait out each GET's timeout: 8 s for one
// with no answer, 30 s for one whose body stalled. Before the fix the
// daemon exited 8.9 s after umount in this test, and 30 s in a run where
// a readahead GET's body had stalled.
func TestUmountDuringReadsOfASilentEndpoint(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	tp := startToxiproxy(t)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"big.bin": randData(94, 64<<20)})
	addr := tp.proxy(t, "umount-inflight", srv.m.Addr)
	m := startMount(t, srv, srv.source(bucket, ""), "", endpointOf(addr)...)
	p := filepath.Join(m.dir, "big.bin")
	if out, err := exec.Command("dd", "if="+p, "of=/dev/null", "bs=1M", "count=2").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v %s", err, out)
	}
	tp.toxic(t, "umount-inflight", "hole-up", "timeout", "upstream", 1, map[string]int64{"timeout": 0})
	tp.toxic(t, "umount-inflight", "hole-down", "timeout", "downstream", 1, map[string]int64{"timeout": 0})
	dd := exec.Command("dd", "if="+p, "of=/dev/null", "bs=1M", "skip=30")
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // its GETs wait on the endpoint
	_ = dd.Process.Kill()
	_ = dd.Wait()

	start := time.Now()
	if out, err := exec.Command("umount", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	for syscall.Kill(m.pid, 0) == nil && time.Since(start) < 30*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("the daemon exited %v after umount", took.Round(time.Millisecond))
	if took > umountExitBound {
		t.Errorf("the daemon exited %v after umount (want within %v)\n%s", took.Round(time.Millisecond), umountExitBound, logTail(m.cacheDir))
	}
	if syscall.Kill(m.pid, 0) != nil {
		m.pid = 0 // exited: nothing left for the harness to unmount
	}
}
