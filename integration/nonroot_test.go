package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		if out, err := runAs(t, "fusermount3", "-u", mnt); err != nil {
			t.Errorf("fusermount3 -u as the user: %v %s", err, out)
		}
	}()
	if out, err := runAs(t, "cat", filepath.Join(mnt, "a.txt")); err != nil || out != "hello\n" {
		t.Errorf("reading through the user's mount: %v %q", err, out)
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
