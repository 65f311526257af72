package integration

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratafs/strata/internal/testserver"
)

// asNobody runs a shell command as uid/gid 65534.
func asNobody(t *testing.T, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPermissionsHonoured: with --allow-other, other users meet the
// owner and modes the mount maps objects to (the kernel checks them:
// default_permissions): a 0644 file is readable but not writable by
// them, a 0600 file not even readable.
func TestPermissionsHonoured(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		testserver.SkipOrFail(t, "needs root to act as another user")
	}
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"a.txt": []byte("hello\n"), "d/b.txt": []byte("b\n")})
	for _, tc := range []struct {
		mode     string
		readable bool
	}{{"0644", true}, {"0600", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			m := startMount(t, srv, srv.source(bucket, ""), "", "--allow-other", "--uid", "0", "--gid", "0",
				"--file-mode", tc.mode, "--dir-mode", "0755")
			// t.TempDir's directories are 0700: let the other user reach the mountpoint.
			for d := filepath.Dir(m.dir); d != "/" && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			out, err := asNobody(t, "cat "+filepath.Join(m.dir, "a.txt"))
			if tc.readable && (err != nil || out != "hello\n") {
				t.Errorf("another user reading a %s file: %v %q", tc.mode, err, out)
			}
			if !tc.readable && (err == nil || !strings.Contains(out, "Permission denied")) {
				t.Errorf("another user read a %s file: %v %q", tc.mode, err, out)
			}
			out, err = asNobody(t, "echo x >> "+filepath.Join(m.dir, "a.txt"))
			if err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("another user wrote a %s file owned by root: %v %q", tc.mode, err, out)
			}
			out, err = asNobody(t, "touch "+filepath.Join(m.dir, "d", "new.txt"))
			if err == nil || !strings.Contains(out, "Permission denied") {
				t.Errorf("another user created a file in a 0755 directory owned by root: %v %q", err, out)
			}
			// The owner (root here) still writes.
			if err := os.WriteFile(filepath.Join(m.dir, "d", "mine.txt"), []byte("ok"), 0o644); err != nil {
				t.Errorf("the owner's write: %v", err)
			}
		})
	}
}

// TestCacheFilesPrivate: everything strata creates under the cache dir is
// for its owner only (directories 0700, files 0600), whatever the umask.
func TestCacheFilesPrivate(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"a.bin": randData(7, 3<<20), "d/b.txt": []byte("b")})
	cacheDir := filepath.Join(t.TempDir(), "cache") // strata creates it
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir)
	if d := diffTrees(expect(map[string][]byte{"a.bin": randData(7, 3<<20), "d/b.txt": []byte("b")}, ""), tree(t, m.dir)); d != "" {
		t.Fatal(d)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "w.txt"), []byte("written"), 0o666); err != nil {
		t.Fatal(err)
	}
	m.unmount()
	n := 0
	err := filepath.WalkDir(cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		switch perm := fi.Mode().Perm(); {
		case d.IsDir() && perm&0o077 != 0:
			t.Errorf("%s: directory mode %o, want no group or other access", p, perm)
		case d.Type().IsRegular() && perm&0o077 != 0:
			t.Errorf("%s: file mode %o, want no group or other access", p, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("only %d entries under the cache dir", n)
	}
}

// TestFileSourceWriteModes: files and directories written through a
// mount of a file:// source get --file-mode and --dir-mode in the source
// tree, as they show in the mount (the daemon's umask of 077, which keeps
// its cache private, made them 0600 and 0700).
func TestFileSourceWriteModes(t *testing.T) {
	requireFUSE(t)
	src := &localSource{t.TempDir()}
	bucket := src.newBucket(t)
	m := startMount(t, src, src.source(bucket, ""), "", "--upload", "sync", "--file-mode", "0640", "--dir-mode", "0750")
	if err := os.MkdirAll(filepath.Join(m.dir, "d", "e"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "d", "e", "f"), []byte("data"), 0o666); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{"d": 0o750, "d/e": 0o750, "d/e/f": 0o640} {
		fi, err := os.Stat(filepath.Join(src.root, bucket, p))
		if err != nil {
			t.Fatalf("%s in the source tree: %v", p, err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s in the source tree: mode %o, want %o", p, got, want)
		}
	}
}
