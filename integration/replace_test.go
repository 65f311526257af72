package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReaderRacingARenameOverTheFile: four processes each write a new
// version of state.json to a temporary file and os.replace it over the
// target, 15 times, while another process reads the target 200 times (a
// trainer's atomic metrics file and a monitor). On local disk every read
// gets a whole file. Through the mount a reader that looked the file up
// just before a rename over it opened that version after the rename had
// retired its cached copy, and read through to the bucket, which no
// longer holds it: ESTALE, 7-13 reads a run. A version replaced through
// the mount now stays cached for a grace period. With --upload async the
// versions are staged files that never reach the bucket: 6-7 reads a run
// failed there; a replaced node now keeps its staged content for the
// grace. The last 1 read in 10-15 runs (ESTALE, once a torn JSON) came
// from a renamed file given a second inode by a later lookup of its new
// name (TestRenamedFileKeepsItsInode). With --upload-delay 0, 5-100 reads
// failed in most runs and writers failed: see
// TestRenameOfAnUploadedFileOverAWrittenOne and writeback's
// TestRenamedUploadInFlightHoldsItsOldKey.
func TestReaderRacingARenameOverTheFile(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, tc := range []struct {
		name  string
		runs  int
		flags []string
	}{
		{"sync", 1, []string{"--upload", "sync"}},
		{"async", 1, []string{"--upload", "async"}},
		// Uploads start at each close: renames meet uploads in flight.
		// Three runs: the later ones start with the file in the bucket.
		{"async-delay-0", 3, []string{"--upload", "async", "--upload-delay", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.newBucket(t)
			m := startMount(t, srv, srv.source(bucket, ""), "", tc.flags...)
			for range tc.runs {
				readWhileReplacing(t, m.dir)
			}
		})
	}
}

func readWhileReplacing(t *testing.T, dir string) {
	script := `
import os, sys, json, multiprocessing as mp
root = sys.argv[1]
target = os.path.join(root, "state.json")
def w(i):
    for k in range(15):
        tmp = os.path.join(root, "state.json.tmp-%d" % os.getpid())
        with open(tmp, "w") as f:
            json.dump({"writer": i, "k": k, "pad": "x" * 5000}, f)
        os.replace(tmp, target)
def r(q):
    bad = []
    for _ in range(200):
        try:
            with open(target) as f:
                json.loads(f.read())
        except FileNotFoundError:
            pass
        except Exception as e:
            bad.append(repr(e))
    q.put(bad)
if __name__ == "__main__":
    q = mp.Queue()
    ps = [mp.Process(target=w, args=(i,)) for i in range(4)] + [mp.Process(target=r, args=(q,))]
    [p.start() for p in ps]
    bad = q.get()
    [p.join() for p in ps]
    codes = [p.exitcode for p in ps]
    print("exit codes", codes, "bad reads", len(bad), bad[:3])
    sys.exit(1 if bad or any(codes) else 0)
`
	out, err := exec.Command("python3", "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err != nil {
		t.Fatal(err)
	}
}

// TestReopenOfAReplacedFileReadsItsOwnBytes: with --upload async, a file
// written and uploaded (never read back, so the mount still knows it as
// the file it wrote) is held by a process (an O_PATH descriptor: a lookup
// with no open), replaced by a rename of a new file over its name, and
// then opened through that descriptor. On local disk the open reads the
// replaced file's bytes. Through the mount the open asked the bucket for
// the name's current version: the new file's bytes once its upload had
// landed (silently the wrong file), and, while a cancelled upload of the
// name was being taken back down, ESTALE (README's async known gap).
func TestReopenOfAReplacedFileReadsItsOwnBytes(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, newLanded := range []bool{false, true} {
		name := map[bool]string{false: "new file pending", true: "new file uploaded"}[newLanded]
		t.Run(name, func(t *testing.T) {
			bucket := srv.newBucket(t)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async", "--upload-delay", "0")
			target := filepath.Join(m.dir, "state.json")
			old, repl := strings.Repeat("A", 5000), strings.Repeat("B", 4000)
			if err := os.WriteFile(target, []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
				t.Fatalf("strata sync: %v: %s", err, errOut)
			}
			fd := holdFile(t, target)
			tmp := target + ".tmp"
			if err := os.WriteFile(tmp, []byte(repl), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, target); err != nil {
				t.Fatal(err)
			}
			if newLanded {
				if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
					t.Fatalf("strata sync: %v: %s", err, errOut)
				}
			}
			wantBytes(t, "the replaced file", readHeld(t, fd), old)
			if got, err := os.ReadFile(target); err != nil || string(got) != repl {
				t.Fatalf("the name reads %d bytes (%v), want the new file's", len(got), err)
			}
		})
	}
}

// TestRenamedFileKeepsItsInode: a file written with --upload async and
// renamed (its upload still pending) keeps its inode number when the
// kernel looks its new name up again (here after `strata refresh` drops
// the kernel's entry; a dentry revalidated after its timeout does the
// same), as rename(2) does on any filesystem. The mount numbered such a
// lookup from the new name, so the kernel got a second inode for the same
// upload. A rename over the name then cancelled that upload through the
// second inode, and a process holding the first (open, or looked up and
// about to open) read ESTALE or a size and bytes from different files:
// the async remainder of TestReaderRacingARenameOverTheFile (1 read of 200).
func TestRenamedFileKeepsItsInode(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async")
	target, tmp := filepath.Join(m.dir, "state.json"), filepath.Join(m.dir, "state.json.tmp")
	mine, theirs := strings.Repeat("B", 5000), strings.Repeat("C", 4000)
	if err := os.WriteFile(tmp, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	fd := holdFile(t, tmp)
	var before unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runStrata(t, srv, "refresh", m.dir, "state.json"); err != nil {
		t.Fatalf("strata refresh: %v: %s", err, errOut)
	}
	var after unix.Stat_t
	if err := unix.Stat(target, &after); err != nil {
		t.Fatal(err)
	}
	if after.Ino != before.Ino {
		t.Errorf("the renamed file's new name is inode %d, it was created as %d", after.Ino, before.Ino)
	}
	if err := os.WriteFile(tmp, []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, "the replaced file", readHeld(t, fd), mine)
}

// TestRenameOfAnUploadedFileOverAWrittenOne: with --upload async, a file
// written here (state.json, its upload waiting for --upload-delay), then
// a temporary file written and fsync'd (uploaded), then renamed over it (a
// server-side copy: the temporary file is already in the bucket). The
// next lookup of the name (here after `strata refresh` drops the kernel's
// entry; after the entry timeout or under memory pressure too) found the
// replaced file's local entry still standing, and every read of the name
// failed with ESTALE (with --upload-delay 0, a writer replacing a file
// through a temporary one met it most runs).
func TestRenameOfAnUploadedFileOverAWrittenOne(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async")
	target, tmp := filepath.Join(m.dir, "state.json"), filepath.Join(m.dir, "state.json.tmp")
	if err := os.WriteFile(target, []byte(strings.Repeat("A", 5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("B", 4000)
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(want); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runStrata(t, srv, "refresh", m.dir, "state.json"); err != nil {
		t.Fatalf("strata refresh: %v: %s", err, errOut)
	}
	got, err := os.ReadFile(target)
	if err != nil {
		t.Fatalf("reading the name after the rename: %v", err)
	}
	wantBytes(t, "the name", string(got), want)
}

// TestRewriteThroughTheNameReachesAHeldFile: a file written here and
// uploaded is held by a process (an O_PATH descriptor), the kernel looks
// its name up again (after `strata refresh` drops its entry), and the
// file is rewritten through the name. On local disk that is one file: the
// held descriptor reopens to the new bytes, and the inode number does not
// change. Through the mount the lookup numbered the file from its bucket
// version, so the kernel got a second inode for it, and the held one read
// the bytes before the rewrite.
func TestRewriteThroughTheNameReachesAHeldFile(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	target := filepath.Join(m.dir, "log.txt")
	if err := os.WriteFile(target, []byte(strings.Repeat("1", 3000)), 0o644); err != nil {
		t.Fatal(err)
	}
	fd := holdFile(t, target)
	var before, after unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runStrata(t, srv, "refresh", m.dir, "log.txt"); err != nil {
		t.Fatalf("strata refresh: %v: %s", err, errOut)
	}
	if err := unix.Stat(target, &after); err != nil {
		t.Fatal(err)
	}
	if after.Ino != before.Ino {
		t.Errorf("the uploaded file is inode %d when looked up again, it was created as %d", after.Ino, before.Ino)
	}
	want := strings.Repeat("2", 2000)
	if err := os.WriteFile(target, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, "the held file", readHeld(t, fd), want)
}

// holdFile opens path with O_PATH: the process holds the file (a lookup)
// without opening it. Closed at the end of the test.
func holdFile(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// readHeld opens the file fd holds, through /proc/self/fd, and reads it.
func readHeld(t *testing.T, fd int) string {
	t.Helper()
	got, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		t.Fatalf("reopening the held file: %v", err)
	}
	return string(got)
}

// wantBytes fails t unless got (a file of one repeated byte) is want.
func wantBytes(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s read %d bytes starting %q, want %d bytes of %q", what, len(got), got[:min(len(got), 8)], len(want), want[:1])
	}
}
