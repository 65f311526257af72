package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// TestUmountForce: a mount whose daemon stops answering (SIGSTOP here; a
// deadlock or a cache dir it serves itself in the field) holds every
// process that touches it. `strata umount --force` aborts the FUSE
// connection, which frees them (ENOTCONN), and detaches the mount, so the
// mountpoint takes a new mount without a reboot.
func TestUmountForce(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"f": []byte("data")})
	bin := testserver.Binary(t, "strata")
	m := startMount(t, srv, srv.source(bucket, ""), "")
	if m.pid == 0 {
		t.Fatal("no daemon pid in session.json")
	}
	pid := m.pid
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }() // a safety net: usually gone by then
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A reader that gets stuck on the hung mount (never touched from this
	// process: a stat here would hang the test).
	stuck := exec.Command("cat", filepath.Join(m.dir, "f"))
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	stuckDone := make(chan error, 1)
	go func() { stuckDone <- stuck.Wait() }()
	select {
	case err := <-stuckDone:
		t.Fatalf("cat finished on a mount whose daemon is stopped: %v", err)
	case <-time.After(500 * time.Millisecond):
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "umount", "--force", m.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("strata umount --force: %v\n%s", err, out)
	}
	select {
	case err := <-stuckDone: // freed: it fails with ENOTCONN
		t.Logf("the stuck reader was freed: %v", err)
	case <-time.After(time.Minute):
		_ = stuck.Process.Kill() // the test fails either way
		t.Fatal("the reader stuck on the mount was not freed by umount --force")
	}
	if isMounted(m.dir) {
		t.Fatal("still mounted after umount --force")
	}
	if _, err := os.ReadDir(m.dir); err != nil {
		t.Fatalf("mountpoint unusable after umount --force: %v", err)
	}
	// The daemon, resumed, finds its connection gone and exits.
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1500 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL) // the test fails either way
		t.Errorf("the daemon did not exit 30s after its connection was aborted")
	}
	m.pid = 0

	// The same mountpoint takes a new mount.
	args := append([]string{"mount", srv.source(bucket, ""), m.dir, "--cache-dir", t.TempDir()}, srv.flags()...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), srv.env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("remount after umount --force: %v\n%s", err, out)
	}
	defer unmountAndWait(t, m.dir, "")
	if b, err := os.ReadFile(filepath.Join(m.dir, "f")); err != nil || string(b) != "data" {
		t.Fatalf("read after remount: %q %v", b, err)
	}
	// Plain `strata umount` unmounts a healthy mount.
	if out, err := exec.Command(bin, "umount", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("strata umount: %v\n%s", err, out)
	}
	if isMounted(m.dir) {
		t.Fatal("still mounted after strata umount")
	}
}

// TestFailedMountLeavesOtherLogAlone: a second mount of a cache dir in use
// is refused, and does not write its failure into the first mount's log.
func TestFailedMountLeavesOtherLogAlone(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	first := startMount(t, srv, srv.source(bucket, ""), "", "--log-format", "json")
	before, _ := os.ReadFile(filepath.Join(first.cacheDir, "strata.log"))
	_, out, err := tryMount(t, srv, srv.source(bucket, ""), first.cacheDir, "--log-format", "json")
	if err == nil {
		t.Fatal("a second mount of a cache dir in use succeeded")
	}
	if !strings.Contains(out, "in use") {
		t.Errorf("error %q does not say the cache dir is in use", out)
	}
	after, _ := os.ReadFile(filepath.Join(first.cacheDir, "strata.log"))
	if added := strings.TrimPrefix(string(after), string(before)); strings.Contains(added, "in use") || strings.Contains(added, "error") {
		t.Errorf("the failed mount wrote into the other mount's log:\n%s", added)
	}
}

// TestUmountRefusesOtherFilesystems: `strata umount` is for Strata
// mounts. Given another filesystem's mountpoint (a typo, a parent
// directory, a tmpfs), it used to unmount it, and with --force abort any
// FUSE connection (an sshfs); it now refuses, and the mount stays.
func TestUmountRefusesOtherFilesystems(t *testing.T) {
	requireFUSE(t)
	bin := testserver.Binary(t, "strata")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "strata-test", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"umount", dir}, {"umount", "--force", dir}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil {
			t.Errorf("strata %v: exit 0, want a refusal", args)
		} else if !strings.Contains(string(out), "not a Strata mount") {
			t.Errorf("strata %v: %q does not say it is not a Strata mount", args, out)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "kept" || !isMounted(dir) {
			t.Fatalf("after strata %v: the tmpfs is gone (%q %v, mounted %v)", args, b, err, isMounted(dir))
		}
	}
}
