package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWritesAfterTheNameWent: a process holds a file open for writing (a
// logger's O_APPEND descriptor, an `r+` update) and goes on writing after
// another process replaced the name (wrote a temporary file and renamed
// it over: an atomic save) or deleted it. On local disk those writes go
// to a file that is in no directory any more, gone with its last close:
// the name holds the new file, or nothing. So must the mount and the
// bucket. A log rotated under its writer (renamed to log.1, a new log
// written) gets the writer's lines under log.1.
//
// Two defects, each seen in both upload modes:
//   - The mount forgets which node wrote a file once its upload is
//     complete (after 64 files written, every few files: a git commit into
//     the mount is enough), and a lookup of the name after that (the
//     kernel looks a rename's target up again; any lookup after its entry
//     was dropped) made a second node for the same file: the rename or
//     the unlink reached that one, and the descriptor's node uploaded its
//     writes over the renamed file ("old" + "APPENDED" at the old size) or
//     brought the deleted file back; after a rotation the writer's lines
//     went into the new log, after its bytes, with zeros between. The
//     same happened when the kernel had forgotten the written file's node
//     before the open (drop_caches, memory pressure): the node made then
//     had the writer's number, and a later lookup a third one.
//   - The first write after the name went listed the name again: `ls`
//     showed the deleted file, and reading it gave ESTALE.
func TestWritesAfterTheNameWent(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			w := srv.writer(t, bucket)
			for _, c := range []struct {
				name   string
				flags  int
				op     string // "replace": rename a new file over the name; "delete"; "rotate": rename the file away, then write a new one under the name; "move-dir": rename its directory
				forget bool   // write more files than the mount tracks, drop the kernel's entry
				early  bool   // open before its upload is complete (async: pending)
			}{
				{"append", unix.O_WRONLY | unix.O_APPEND, "replace", true, false},
				{"update", unix.O_RDWR, "replace", true, false},
				{"delete-forgotten", unix.O_WRONLY | unix.O_APPEND, "delete", true, false},
				{"delete", unix.O_WRONLY | unix.O_APPEND, "delete", false, false},
				{"rotate", unix.O_WRONLY | unix.O_APPEND, "rotate", true, false},
				{"move-dir", unix.O_WRONLY | unix.O_APPEND, "move-dir", true, false},
				{"append-early", unix.O_WRONLY | unix.O_APPEND, "replace", true, true},
			} {
				key := c.name + ".log"
				if c.op == "move-dir" {
					if err := os.Mkdir(filepath.Join(m.dir, c.name), 0o755); err != nil {
						t.Fatal(err)
					}
					key = c.name + "/f.log"
				}
				target := filepath.Join(m.dir, key)
				if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
				if !c.early {
					strataSync(t, srv, m) // its upload complete
				}
				if c.forget {
					// The kernel forgets the file's node (nothing holds it),
					// and the open below makes a new one.
					dropCaches(t)
				}
				fd, err := unix.Open(target, c.flags, 0)
				if err != nil {
					t.Fatal(err)
				}
				if c.early {
					strataSync(t, srv, m)
				}
				closed := false
				defer func() {
					if !closed { // a failed step: let the mount go
						unix.Close(fd)
					}
				}()
				if c.forget {
					for i := range 80 {
						p := filepath.Join(m.dir, fmt.Sprintf("%s-other-%d", c.name, i))
						if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					if _, errOut, err := runStrata(t, srv, "refresh", m.dir, key); err != nil {
						t.Fatalf("strata refresh: %v: %s", err, errOut)
					}
					if _, err := os.Stat(target); err != nil { // the kernel looks it up again
						t.Fatal(err)
					}
				}
				switch c.op {
				case "delete":
					if err := os.Remove(target); err != nil {
						t.Fatal(err)
					}
				case "replace":
					tmp := target + ".tmp"
					if err := os.WriteFile(tmp, []byte("new!!"), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(tmp, target); err != nil {
						t.Fatal(err)
					}
				case "move-dir":
					if err := os.Rename(filepath.Join(m.dir, c.name), filepath.Join(m.dir, c.name+"-moved")); err != nil {
						t.Fatal(err)
					}
				case "rotate": // a log rotated under a writer that keeps its descriptor
					if err := os.Rename(target, target+".1"); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(target, []byte("new!!"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := unix.Write(fd, []byte("APPENDED")); err != nil {
					t.Errorf("%s: writing to the file after its name went: %v", c.name, err)
					continue // the deferred close lets the mount go
				}
				if c.flags&unix.O_RDWR != 0 { // it reads what it wrote, as on local disk
					buf := make([]byte, 64)
					n, err := unix.Pread(fd, buf, 0)
					if err != nil || string(buf[:max(n, 0)]) != "APPENDED" {
						t.Errorf("%s: the descriptor reads back %q (%v), want %q", c.name, buf[:max(n, 0)], err, "APPENDED")
					}
				}
				closed = true
				if err := unix.Close(fd); err != nil {
					t.Fatalf("%s: closing the file after its name went: %v", c.name, err)
				}
				strataSync(t, srv, m)
				if c.op == "move-dir" {
					moved := c.name + "-moved/f.log"
					got, err := os.ReadFile(filepath.Join(m.dir, moved))
					if err != nil || string(got) != "oldAPPENDED" {
						t.Errorf("%s: the moved file reads %q (%v) through the mount, want %q", c.name, got, err, "oldAPPENDED")
					}
					if sum, n, err := bucketSHA(t, w, moved); err != nil || sum != sha([]byte("oldAPPENDED")) {
						t.Errorf("%s: the bucket's %s is %d bytes (%v), want %q", c.name, moved, n, err, "oldAPPENDED")
					}
					if _, n, err := bucketSHA(t, w, key); err == nil {
						t.Errorf("%s: the old name %s is in the bucket again (%d bytes)", c.name, key, n)
					}
					continue
				}
				if c.op == "rotate" {
					got, err := os.ReadFile(target + ".1")
					if err != nil || string(got) != "oldAPPENDED" {
						t.Errorf("%s: the renamed file reads %q (%v) through the mount, want %q", c.name, got, err, "oldAPPENDED")
					}
					if sum, n, err := bucketSHA(t, w, key+".1"); err != nil || sum != sha([]byte("oldAPPENDED")) {
						t.Errorf("%s: the bucket's %s.1 is %d bytes (%v), want %q", c.name, key, n, err, "oldAPPENDED")
					}
				}
				if c.op == "delete" {
					if _, err := os.Stat(target); !os.IsNotExist(err) {
						got, rerr := os.ReadFile(target)
						t.Errorf("%s: the deleted name stats %v through the mount and reads %q (%v), want ENOENT", c.name, err, got, rerr)
					}
					if names := listNames(t, m.dir); slices.Contains(names, key) {
						t.Errorf("%s: the mount lists the deleted name", c.name)
					}
					if _, n, err := bucketSHA(t, w, key); err == nil {
						t.Errorf("%s: the deleted file is back in the bucket (%d bytes): the descriptor's writes went up", c.name, n)
					}
					continue
				}
				got, err := os.ReadFile(target)
				if err != nil || string(got) != "new!!" {
					t.Errorf("%s: the name reads %q (%v) through the mount, want %q", c.name, got, err, "new!!")
				}
				if sum, n, err := bucketSHA(t, w, key); err != nil || sum != sha([]byte("new!!")) {
					t.Errorf("%s: the bucket's %s is %d bytes (%v), not the file renamed over it (%q): the replaced file's writes went up", c.name, key, n, err, "new!!")
				}
			}
		})
	}
}

// strataSync waits until every file written to m is in the bucket.
func strataSync(t *testing.T, srv server, m *mount) {
	t.Helper()
	if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
		t.Fatalf("strata sync: %v: %s", err, errOut)
	}
}

// TestTwoDescriptorsOfAFileWhoseNameWent: a file open twice (two
// processes, or dup'd by a shell) whose name is replaced or deleted lives
// on for both descriptors until the last is closed, as on local disk.
// Closing the first threw the staged bytes away, and the other's reads,
// writes and fsync failed with ESTALE; with --upload async (the kernel
// writing the staging file by passthrough) its fsync tried to upload the
// gone file under the name, over the file that had taken it (found by
// TestRandomCallsMatchLocalDisk).
func TestTwoDescriptorsOfAFileWhoseNameWent(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			w := srv.writer(t, bucket)
			for _, op := range []string{"replace", "delete"} {
				target := filepath.Join(m.dir, op)
				first, err := unix.Open(target, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				second, err := unix.Open(target, unix.O_RDWR|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := unix.Pwrite(first, []byte("first "), 0); err != nil {
					t.Fatal(err)
				}
				if _, err := unix.Pwrite(second, []byte("second"), 6); err != nil {
					t.Fatal(err)
				}
				if op == "replace" {
					if err := os.WriteFile(target+".tmp", []byte("new!!"), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(target+".tmp", target); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Remove(target); err != nil {
					t.Fatal(err)
				}
				if err := unix.Close(first); err != nil {
					t.Errorf("%s: closing the first descriptor: %v", op, err)
				}
				buf := make([]byte, 64)
				if n, err := unix.Pread(second, buf, 0); err != nil || string(buf[:max(n, 0)]) != "first second" {
					t.Errorf("%s: the other descriptor reads %q (%v), want %q", op, buf[:max(n, 0)], err, "first second")
				}
				if _, err := unix.Pwrite(second, []byte("!"), 12); err != nil {
					t.Errorf("%s: writing through the other descriptor: %v", op, err)
				}
				if err := unix.Fsync(second); err != nil {
					t.Errorf("%s: fsync of the other descriptor: %v", op, err)
				}
				if n, err := unix.Pread(second, buf, 0); err != nil || string(buf[:max(n, 0)]) != "first second!" {
					t.Errorf("%s: after its write it reads %q (%v)", op, buf[:max(n, 0)], err)
				}
				if err := unix.Close(second); err != nil {
					t.Errorf("%s: closing the other descriptor: %v", op, err)
				}
				strataSync(t, srv, m)
				got, rerr := os.ReadFile(target)
				sum, n, err := bucketSHA(t, w, op)
				if op == "delete" {
					if rerr == nil || err == nil {
						t.Errorf("delete: the name reads %q (%v) through the mount and is %d bytes in the bucket (%v), want neither", got, rerr, n, err)
					}
					continue
				}
				if rerr != nil || string(got) != "new!!" {
					t.Errorf("replace: the name reads %q (%v) through the mount, want %q", got, rerr, "new!!")
				}
				if err != nil || sum != sha([]byte("new!!")) {
					t.Errorf("replace: the bucket's object is %d bytes (%v), not the file renamed over it", n, err)
				}
			}
		})
	}
}

// TestAGoneFileLetsGoNothingOfItsName: in --upload async the close of one
// descriptor of a file still open elsewhere (a forked child's copy) holds
// its upload for the file's last close. The last close of another file,
// one whose name was deleted or renamed over while it was open, let that
// held upload start: the bucket got the file at the name as it stood at
// the child's close, while its writer was still writing.
func TestAGoneFileLetsGoNothingOfItsName(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async", "--upload-delay", "0")
	w := srv.writer(t, bucket)
	for _, op := range []string{"delete", "replace"} {
		target := filepath.Join(m.dir, op)
		half, rest := randData(90, 1<<20), randData(91, 1<<20)
		whole := append(append([]byte(nil), half...), rest...)
		g := guardBucket(t, w, op, "", sha(whole))
		gone, err := unix.Open(target, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Pwrite(gone, []byte("gone"), 0); err != nil {
			t.Fatal(err)
		}
		next := target
		if op == "replace" {
			next = target + ".tmp"
		} else if err := os.Remove(target); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(next)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(half); err != nil {
			t.Fatal(err)
		}
		if op == "replace" {
			if err := os.Rename(next, target); err != nil {
				t.Fatal(err)
			}
		}
		child, err := unix.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Close(child); err != nil {
			t.Fatalf("%s: close of the child's copy: %v", op, err)
		}
		if err := unix.Close(gone); err != nil {
			t.Fatalf("%s: close of the gone file: %v", op, err)
		}
		time.Sleep(500 * time.Millisecond) // an upload started now would land
		if _, err := f.Write(rest); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		runSync(t, m)
		if got, n, err := bucketSHA(t, w, op); err != nil || got != sha(whole) {
			t.Errorf("%s: the bucket holds %d bytes (%v), want the whole file", op, n, err)
		}
		g.check()
	}
}
