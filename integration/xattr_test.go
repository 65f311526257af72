package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// copyTree is a small tree as cp -a and rsync -a see one: nested
// directories, modes, old mtimes, and a file with a user xattr (which
// those tools try to copy and must give up on quietly).
func copyTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	files := map[string][]byte{
		"a/x.bin":     randData(41, 300<<10+7),
		"a/sub/y.txt": []byte("y\n"),
		"top.txt":     []byte("top\n"),
		"empty":       nil,
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, data := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Setxattr(filepath.Join(src, "top.txt"), "user.origin", []byte("test"), 0); err != nil {
		t.Logf("the source filesystem keeps no user xattrs (%v): cp copies none", err)
	}
	return src
}

// sameTree fails the test unless dir holds exactly src's files and bytes.
func sameTree(t *testing.T, src, dir string) {
	t.Helper()
	if d := diffTrees(tree(t, src), tree(t, dir)); d != "" {
		t.Errorf("%s differs from the source:\n%s", dir, d)
	}
}

// cp -p, cp -a and rsync -a into a mount exit 0 and say nothing: the
// mount answers setxattr (ACLs, user attributes) with ENOTSUP, which they
// take as "this filesystem keeps no xattrs". It answered ENODATA, and cp
// exited 1 with "preserving permissions ...: No data available".
func TestCopyToolsPreserveIntoMount(t *testing.T) {
	requireFUSE(t)
	for _, tool := range []string{"cp", "rsync"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make sysdeps installs it)", tool)
		}
	}
	for _, s := range []struct {
		name  string
		start func(*testing.T) server
	}{{"file", func(t *testing.T) server { return &localSource{t.TempDir()} }}, {"minio", startMinIO}} {
		t.Run(s.name, func(t *testing.T) {
			srv := s.start(t)
			m := startMount(t, srv, srv.source(srv.newBucket(t), ""), "")
			src := copyTree(t)
			run := func(name string, args ...string) {
				t.Helper()
				cmd := exec.Command(name, args...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil || stderr.Len() > 0 {
					t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
				}
			}
			run("cp", "-p", filepath.Join(src, "a", "x.bin"), filepath.Join(m.dir, "p.bin"))
			if a, b := tree(t, filepath.Join(src, "a"))["x.bin"], tree(t, m.dir)["p.bin"]; a != b {
				t.Fatalf("cp -p copied the wrong bytes")
			}
			run("cp", "-a", src, filepath.Join(m.dir, "cp-a"))
			sameTree(t, src, filepath.Join(m.dir, "cp-a"))
			run("rsync", "-a", src+"/", filepath.Join(m.dir, "rsync-a"))
			sameTree(t, src, filepath.Join(m.dir, "rsync-a"))
			run("rsync", "-a", src+"/", filepath.Join(m.dir, "rsync-a")) // again: an update in place
			sameTree(t, src, filepath.Join(m.dir, "rsync-a"))
			runSync(t, m)
		})
	}
}

// nobody is the uid and gid the tests run other users' commands as.
const nobody = 65534

// runAs runs a command as uid nobody and returns its combined output.
func runAs(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// binaryForOthers is a copy of the strata binary that uid nobody can run:
// the checkout may sit in a directory only root can enter (a fresh clone
// under mktemp -d is 0700), and os.MkdirTemp makes its directories 0700.
func binaryForOthers(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "strata-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // best effort: a temp dir
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(binPath(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "strata")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// reachable lets other users walk to m's mountpoint (t.TempDir makes
// its directories 0700).
func reachable(t *testing.T, m *mount) {
	t.Helper()
	for d := filepath.Dir(m.dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// user.strata.sync (what `strata sync` reads) answers for the whole mount:
// every pending upload, the failed ones with their keys and the paths of
// their kept data. Another user, who may read the files (--allow-other),
// is refused it; the owner of the mount's files (--uid) is not.
func TestSyncXattrRefusedToOtherUsers(t *testing.T) {
	requireFUSE(t)
	srv := &localSource{t.TempDir()}
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"d/a.txt": []byte("for everyone\n")})
	strata := binaryForOthers(t)

	m := startMount(t, srv, srv.source(bucket, ""), "", "--allow-other")
	reachable(t, m)
	if out, err := runAs(t, "cat", filepath.Join(m.dir, "d", "a.txt")); err != nil || out != "for everyone\n" {
		t.Fatalf("another user reading a 0644 file through --allow-other: %v %q", err, out)
	}
	out, err := runAs(t, strata, "sync", m.dir)
	if err == nil || !strings.Contains(out, "only root") {
		t.Fatalf("strata sync by another user: %v\n%s\nwant a refusal", err, out)
	}
	if _, err := unix.Getxattr(filepath.Join(m.dir, "d"), "user.strata.sync", make([]byte, 4096)); err != nil {
		t.Fatalf("root reading user.strata.sync: %v", err)
	}
	runSync(t, m) // the mount's user

	owned := startMount(t, srv, srv.source(bucket, ""), "", "--allow-other", "--uid", fmt.Sprint(nobody), "--gid", fmt.Sprint(nobody))
	reachable(t, owned)
	if out, err := runAs(t, strata, "sync", owned.dir); err != nil {
		t.Fatalf("strata sync by the owner of the mount's files (--uid): %v\n%s", err, out)
	}
}
