package integration

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// TestRemountAfterKill9: after kill -9 of a daemon its mountpoint is a
// dead FUSE mount (ENOTCONN). Mounting there again detaches it, says so,
// and mounts; it used to refuse ("busy" / "run umount").
func TestRemountAfterKill9(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"f": []byte("data")})
	m := startMount(t, srv, srv.source(bucket, ""), "")
	if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1500 && syscall.Kill(m.pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	m.pid = 0
	cmd := exec.Command(testserver.Binary(t, "strata"), m.args...)
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		if uout, uerr := exec.Command("umount", "-l", m.dir).CombinedOutput(); uerr != nil {
			t.Logf("umount -l %s: %v %s", m.dir, uerr, uout)
		}
		t.Fatalf("mount after kill -9: %v\n%s", err, out)
	}
	defer unmountAndWait(t, m.dir, m.cacheDir)
	if !strings.Contains(string(out), "had died") {
		t.Errorf("the mount did not say it detached the dead one: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(m.dir, "f")); err != nil || string(b) != "data" {
		t.Fatalf("read after remount: %q %v", b, err)
	}
}

// TestRemountWhileDraining: unmounting with uploads pending leaves the old
// daemon running (holding the cache dir) until they are done. Mounting the
// same source and cache dir at once says a previous mount is finishing N
// uploads and waits for it, instead of failing with "directory in use".
func TestRemountWhileDraining(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async")
	f, err := os.Create(filepath.Join(m.dir, "new")) // the lookup needs the bucket
	if err != nil {
		t.Fatal(err)
	}
	srv.stop(t) // the upload fails and is retried: the drain at unmount waits
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	oldPID := m.pid
	if err := exec.Command("umount", m.dir).Run(); err != nil {
		t.Fatalf("umount: %v", err)
	}
	m.pid = 0
	defer func() { _ = syscall.Kill(oldPID, syscall.SIGKILL) }() // usually gone by then
	if syscall.Kill(oldPID, 0) != nil {
		t.Fatal("the old daemon exited at once; nothing to drain")
	}

	cmd := exec.Command(testserver.Binary(t, "strata"), m.args...)
	cmd.Env = m.env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stderr).ReadString('\n')
	if !strings.Contains(line, "a previous Strata mount") || !strings.Contains(line, "finishing 1 uploads") {
		_ = cmd.Process.Kill() // the test fails either way
		_ = cmd.Wait()
		t.Fatalf("first line of the new mount: %q", line)
	}
	// The user's second signal to the old daemon stops its drain (what is
	// left stays journaled for the next mount); the new mount proceeds.
	srv.restart(t)
	if err := syscall.Kill(oldPID, syscall.SIGTERM); err != nil {
		t.Fatalf("the second signal to the old daemon: %v", err)
	}
	rest, _ := bufio.NewReader(stderr).ReadString(0)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the waiting mount failed: %v %s", err, rest)
	}
	defer unmountAndWait(t, m.dir, m.cacheDir)
	if _, err := os.Stat(filepath.Join(m.dir, "new")); err != nil {
		t.Errorf("the file written before the remount: %v", err)
	}
}

// TestRemountAfterLazyUnmountWithAFileOpen: `umount -l` while a process
// holds a file open leaves the old daemon serving that file. Mounting the
// same cache dir again says so (not "finishing 0 uploads"), waits, and
// goes on once the file is closed.
func TestRemountAfterLazyUnmountWithAFileOpen(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"f": []byte("data")})
	m := startMount(t, srv, srv.source(bucket, ""), "")
	f, err := os.Open(filepath.Join(m.dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	oldPID := m.pid
	if out, err := exec.Command("umount", "-l", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("umount -l: %v %s", err, out)
	}
	m.pid = 0
	defer func() { _ = syscall.Kill(oldPID, syscall.SIGKILL) }() // gone once f is closed

	cmd := exec.Command(testserver.Binary(t, "strata"), m.args...)
	cmd.Env = m.env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stderr).ReadString('\n')
	if !strings.Contains(line, "a previous Strata mount") || !strings.Contains(line, "open in it") || strings.Contains(line, "finishing 0 uploads") {
		_ = cmd.Process.Kill() // the test fails either way
		_ = cmd.Wait()
		t.Fatalf("first line of the new mount: %q", line)
	}
	f.Close() // the old daemon's last file: it exits, and the new mount goes on
	rest, _ := io.ReadAll(stderr)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the waiting mount failed: %v %s", err, rest)
	}
	defer unmountAndWait(t, m.dir, m.cacheDir)
	if b, err := os.ReadFile(filepath.Join(m.dir, "f")); err != nil || string(b) != "data" {
		t.Fatalf("read through the new mount: %q %v", b, err)
	}
}
