package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNonRootMountSaysWhy: a user who is not root mounts through
// fusermount3, which opens /dev/fuse with the user's rights and refuses
// --allow-other unless /etc/fuse.conf has user_allow_other. When the
// machine does not allow it, `strata mount` says which of the two is
// missing, and makes nothing; before, it said "fusermount exited with
// code 256" (fusermount3's own message went to the background daemon's
// stderr). Where the machine allows it, the user's mount works and the
// user unmounts it. What this machine allows is read from it: its
// /dev/fuse's mode and its fuse.conf.
func TestNonRootMountSaysWhy(t *testing.T) {
	requireFUSE(t)
	bin := binaryForOthers(t)
	base, err := os.MkdirTemp("", "strata-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	src, mnt, cache := filepath.Join(base, "src"), filepath.Join(base, "mnt"), filepath.Join(base, "cache")
	for _, d := range []string{src, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mountAs := func(extra ...string) (string, error) {
		return runAs(t, bin, append([]string{"mount", "file://" + src, mnt, "--cache-dir", cache}, extra...)...)
	}
	refused := func(out string, err error, want string) {
		t.Helper()
		if err == nil {
			_, _ = runAs(t, "fusermount3", "-u", mnt)
			t.Fatalf("the mount succeeded: %s", out)
		}
		if !strings.Contains(out, want) {
			t.Errorf("refused with %q, want it to say %q", strings.TrimSpace(out), want)
		}
		if _, err := os.Stat(cache); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the refused mount left its cache dir: %v", err)
		}
	}

	dev, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if dev.Mode().Perm()&0o006 != 0o006 { // others may not read and write it (this machine, and CI's)
		out, err := mountAs()
		refused(out, err, fmt.Sprintf("cannot open /dev/fuse as a non-root user (its mode is %#o)", dev.Mode().Perm()))
		return
	}
	conf, _ := os.ReadFile("/etc/fuse.conf")
	if !fuseConfAllowsOther(string(conf)) {
		out, err := mountAs("--allow-other")
		refused(out, err, "needs the line `user_allow_other` in /etc/fuse.conf")
	}
	out, err := mountAs()
	if err != nil {
		t.Fatalf("a non-root mount: %v\n%s", err, out)
	}
	defer func() {
		pids := servingPIDs(mnt)
		if out, err := runAs(t, "fusermount3", "-u", mnt); err != nil {
			t.Errorf("fusermount3 -u as the user: %v %s", err, out)
		}
		waitExited(t, pids)
	}()
	if out, err := runAs(t, "cat", filepath.Join(mnt, "a.txt")); err != nil || out != "hello\n" {
		t.Errorf("reading through the user's mount: %v %q", err, out)
	}
}

// waitExited waits until the processes pids have exited (a daemon flushing
// its index after an unmount), for up to 30 s, then kills what is left
// and fails the test.
func waitExited(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("strata (pid %d) still running 30 s after its unmount", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// fuseConfAllowsOther reports whether fuse.conf enables user_allow_other.
func fuseConfAllowsOther(conf string) bool {
	for _, line := range strings.Split(conf, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if strings.TrimSpace(line) == "user_allow_other" {
			return true
		}
	}
	return false
}

// TestNonRootMountAndUmount: a user who is not root mounts, reads,
// writes, syncs and unmounts with `strata umount`, as on a workstation,
// then mounts again, is killed (kill -9), mounts over the dead mount
// (which `strata mount` detaches) and unmounts with `strata umount --force`.
// This machine's /dev/fuse may be closed to users (0600 here and on CI),
// so the test runs in a mount namespace of its own, where a 0666 node of
// the same device is bound over /dev/fuse (what distributions ship);
// nothing outside it changes. Before, `strata umount` of the user's mount
// failed with "operation not permitted" (umount(2) is root's; a user
// unmounts through fusermount3 -u), and --force failed where fusectl is
// not mounted (a user cannot mount it to abort the connection; the lazy
// detach is still done, with a warning), and a mount over the user's
// dead mount failed (its detach called umount(2)).
func TestNonRootMountAndUmount(t *testing.T) {
	requireFUSE(t)
	bin := binaryForOthers(t)
	var st unix.Stat_t
	if err := unix.Stat("/dev/fuse", &st); err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("", "strata-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	src, mnt, home := filepath.Join(base, "src"), filepath.Join(base, "mnt"), filepath.Join(base, "home")
	t.Cleanup(func() { waitExited(t, servingPIDs(mnt)) }) // before the removal of its cache dir
	for _, d := range []string{src, mnt, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`set -e
# A failed run leaves no daemon behind, and shows the mount table and the
# daemons' logs (a run on a loaded machine once found the mountpoint busy
# at the second mount, with nothing on record to say why).
trap 'st=$?; if [ $st != 0 ]; then echo "=== mountinfo"; grep " %[8]s " /proc/self/mountinfo || true; for f in %[5]s/.cache/strata/*/strata.log; do echo "=== $f"; tail -40 "$f" || true; done; fi; umount -l %[8]s 2>/dev/null || true' EXIT
mknod %[1]s/fuse c %[2]d %[3]d
chmod 0666 %[1]s/fuse
mount --bind %[1]s/fuse /dev/fuse
user() { setpriv --reuid=%[4]d --regid=%[4]d --clear-groups env HOME=%[5]s PATH=/usr/bin:/bin "$@"; }
user %[6]s mount file://%[7]s %[8]s
user cat %[8]s/a.txt
user sh -c 'echo from the user > %[8]s/b.txt'
user %[6]s sync %[8]s
user %[6]s umount %[8]s
if grep -q ' %[8]s ' /proc/self/mountinfo; then echo "still mounted"; exit 9; fi
user %[6]s mount file://%[7]s %[8]s
pkill -9 -f '^%[6]s mount file://%[7]s %[8]s'
while pgrep -f '^%[6]s mount file://%[7]s %[8]s' >/dev/null; do sleep 0.05; done
user %[6]s mount file://%[7]s %[8]s
user cat %[8]s/a.txt
user %[6]s umount --force %[8]s
if grep -q ' %[8]s ' /proc/self/mountinfo; then echo "still mounted after --force"; exit 9; fi
`, base, unix.Major(st.Rdev), unix.Minor(st.Rdev), nobody, home, bin, src, mnt)
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("mount, read, write, sync and umount as a user: %v\n%s", err, out)
	}
	waitExited(t, servingPIDs(mnt)) // the daemon exits after its umount, as the README says
	if strings.Count(string(out), "hello") != 2 {
		t.Errorf("the user read %q, want hello twice", out)
	}
	if !strings.Contains(string(out), "had died (transport endpoint is not connected); detached it") {
		t.Errorf("the mount over the user's killed mount did not detach it:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(src, "b.txt")); err != nil || string(b) != "from the user\n" {
		t.Errorf("the user's file in the source: %v %q", err, b)
	}
	if fi, err := os.Stat(filepath.Join(home, ".cache", "strata")); err != nil || !fi.IsDir() {
		t.Errorf("the user's default cache dir under $HOME/.cache/strata: %v", err)
	}
}
