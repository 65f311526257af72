package integration

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// keptCopies counts the staged copies of failed writes kept in cacheDir.
func keptCopies(t *testing.T, cacheDir string) int {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(cacheDir, "failed-writes"))
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	return n
}

// TestWriteKilledWriter: a writer killed (SIGKILL) halfway through
// rewriting a file publishes nothing: the previous object stays, in both
// upload modes, what it wrote is kept and reported, and the mount shows
// the previous object again, whether it was put in the bucket by someone
// else or written through the mount itself. With --upload async, so too
// when the writer closed one descriptor of the file (journaling the
// rewrite, held for the last close) and was killed writing through
// another (closestop).
func TestWriteKilledWriter(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, tc := range []struct{ mode, by, what string }{
		{"sync", "bucket", "stop"}, {"async", "bucket", "stop"}, {"sync", "mount", "stop"}, {"async", "mount", "stop"},
		{"async", "bucket", "closestop"}, {"async", "mount", "closestop"},
	} {
		mode := tc.mode
		name := mode + "/" + tc.by
		if tc.what != "stop" {
			name += "/" + tc.what
		}
		t.Run(name, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			old := randData(70, 1<<20)
			if tc.by == "bucket" {
				put(t, w, map[string][]byte{"ckpt.bin": old})
			}
			cacheDir := t.TempDir()
			m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", mode)
			if tc.by == "mount" {
				if err := os.WriteFile(filepath.Join(m.dir, "ckpt.bin"), old, 0o644); err != nil {
					t.Fatal(err)
				}
				runSync(t, m)
			}
			src := filepath.Join(t.TempDir(), "src")
			if err := os.WriteFile(src, randData(71, 20<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			g := guardBucket(t, w, "ckpt.bin", sha(old))
			ino0 := inodeOf(t, filepath.Join(m.dir, "ckpt.bin"))
			cmd := runWriterHelper(t, src, filepath.Join(m.dir, "ckpt.bin"), 5<<20, tc.what)
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			if strings.TrimSpace(line) != "stopped" {
				_ = cmd.Process.Kill() // the test fails either way
				t.Fatalf("writer said %q", line)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			// Killed: Wait's error is the signal.
			_ = cmd.Wait()
			time.Sleep(500 * time.Millisecond) // FLUSH and RELEASE of the dead writer
			out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
			if err == nil || !bytes.Contains(out, []byte("ckpt.bin")) {
				t.Fatalf("strata sync should report the write that was not uploaded: %v\n%s", err, out)
			}
			g.check()
			if got, _, err := bucketSHA(t, w, "ckpt.bin"); err != nil || got != sha(old) {
				t.Fatalf("the bucket lost the previous object: %v", err)
			}
			if keptCopies(t, cacheDir) == 0 {
				t.Fatal("what the killed writer wrote was not kept")
			}
			// The mount shows the previous object again, and a write after
			// the failed one builds on it: an append must not turn what
			// the killed writer left (its O_TRUNC) into the new object.
			p := filepath.Join(m.dir, "ckpt.bin")
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, old) {
				t.Fatalf("after the killed rewrite the mount shows %d bytes (want the previous object's %d, equal %v): %v",
					len(got), len(old), bytes.Equal(got, old), err)
			}
			if ino := inodeOf(t, p); ino != ino0 {
				t.Errorf("after the killed rewrite the file is inode %d, was %d: it should be the same file", ino, ino0)
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("appended")); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			want := sha(append(bytes.Clone(old), "appended"...))
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, n, err := bucketSHA(t, w, "ckpt.bin")
				if err == nil && got == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the append after the killed rewrite: the bucket holds %d bytes (want %d): %v", n, len(old)+8, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// inodeOf is the inode number of path.
func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
