package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWriteForkWhileWriting: a process forks while writing a 20 MiB file;
// its children drop their inherited copies (close, exit, exec). In both
// upload modes the bucket only ever holds the old object or the whole new
// one, never the 5 MiB prefix the children saw.
func TestWriteForkWhileWriting(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			old := randData(30, 1<<20)
			put(t, w, map[string][]byte{"ckpt.bin": old})
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			data := randData(31, 20<<20)
			src := filepath.Join(t.TempDir(), "src")
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			g := guardBucket(t, w, "ckpt.bin", sha(old), sha(data))
			if out, err := runWriterHelper(t, src, filepath.Join(m.dir, "ckpt.bin"), 5<<20, "fork").CombinedOutput(); err != nil {
				t.Fatalf("writer: %v\n%s", err, out)
			}
			runSync(t, m)
			if got, n, err := bucketSHA(t, w, "ckpt.bin"); err != nil || got != sha(data) {
				t.Fatalf("after the writer closed: %d bytes, %v", n, err)
			}
			g.check()
		})
	}
}

// TestWriteDupClose: closing a dup'd descriptor in the writing process
// cannot be told apart from the last close (see README, write semantics):
// it publishes what is written so far. What is promised: a close that
// carries no new data uploads nothing (here it would clobber another
// writer's object), and the last close publishes the whole file.
func TestWriteDupClose(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	p := filepath.Join(m.dir, "dup.bin")
	part1 := randData(40, 3<<20)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(part1); err != nil {
		t.Fatal(err)
	}
	dup, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Close(dup); err != nil {
		t.Fatalf("close of the dup: %v", err)
	}
	if got, _, err := bucketSHA(t, w, "dup.bin"); err != nil || got != sha(part1) {
		t.Fatalf("a close with new data publishes it: %v", err)
	}
	// Nothing written since: closing another dup must not upload (it would
	// overwrite what another writer put meanwhile).
	other := []byte("another writer's object")
	put(t, w, map[string][]byte{"dup.bin": other})
	dup, _ = syscall.Dup(int(f.Fd()))
	if err := syscall.Close(dup); err != nil {
		t.Fatalf("close of a dup without new data: %v", err)
	}
	if got, _, _ := bucketSHA(t, w, "dup.bin"); got != sha(other) {
		t.Fatal("a close without new data uploaded the file")
	}
	if err := f.Close(); err != nil {
		t.Fatalf("last close without new data: %v", err)
	}
	if got, _, _ := bucketSHA(t, w, "dup.bin"); got != sha(other) {
		t.Fatal("the last close without new data uploaded the file")
	}
}

// TestWriteDD: dd opens its output, dup2()s it onto stdout and closes the
// first descriptor before it writes. With or without conv=notrunc the
// bucket never holds an empty or partial object, only the old one, then
// the new one.
func TestWriteDD(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	old := randData(50, 8<<20)
	put(t, w, map[string][]byte{"trunc.bin": old, "notrunc.bin": old})
	m := startMount(t, srv, srv.source(bucket, ""), "")
	in := randData(51, 3<<20)
	src := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(src, in, 0o644); err != nil {
		t.Fatal(err)
	}
	patched := append(append([]byte(nil), in...), old[len(in):]...)
	for _, c := range []struct {
		name string
		args []string
		want []byte
	}{
		{"trunc.bin", nil, in},
		{"notrunc.bin", []string{"conv=notrunc"}, patched},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := guardBucket(t, w, c.name, sha(old), sha(c.want))
			args := append([]string{"if=" + src, "of=" + filepath.Join(m.dir, c.name), "bs=1M"}, c.args...)
			if out, err := exec.Command("dd", args...).CombinedOutput(); err != nil {
				t.Fatalf("dd: %v\n%s", err, out)
			}
			time.Sleep(200 * time.Millisecond) // a late wrong upload would show now
			g.check()
			if got, n, err := bucketSHA(t, w, c.name); err != nil || got != sha(c.want) {
				t.Fatalf("after dd: %d bytes, %v", n, err)
			}
		})
	}
}

// TestWriteDDIntoFullCache: dd over an existing object with the cache disk
// full: dd fails with ENOSPC, the previous object stays in the bucket (no
// empty or partial object ever appears), and the bytes staged before the
// failure are kept on the cache disk and reported by `strata sync`.
func TestWriteDDIntoFullCache(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	old := randData(60, 2<<20)
	put(t, w, map[string][]byte{"ckpt.pt": old})
	disk := tmpfs(t, 40<<20)
	cacheDir := filepath.Join(disk, "cache")
	logFile := filepath.Join(t.TempDir(), "strata.log")
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--cache-size", "1GiB", "--log-file", logFile)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("strata log:\n%s", b)
		}
	})
	src := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(src, randData(61, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	g := guardBucket(t, w, "ckpt.pt", sha(old))
	fillDisk(t, disk, 4<<20)
	out, err := exec.Command("dd", "if="+src, "of="+filepath.Join(m.dir, "ckpt.pt"), "bs=1M").CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("No space left")) {
		t.Fatalf("dd into a full cache: %v (want ENOSPC)\n%s", err, out)
	}
	time.Sleep(300 * time.Millisecond) // the last RELEASE follows dd's exit
	g.check()
	if got, _, err := bucketSHA(t, w, "ckpt.pt"); err != nil || got != sha(old) {
		t.Fatalf("the bucket lost the previous object: %v", err)
	}
	if h, _, err := fileSHA(filepath.Join(m.dir, "ckpt.pt")); err != nil || h != sha(old) {
		t.Fatalf("the mount does not show the previous content: %v", err)
	}
	syncOut, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
	if err == nil || !bytes.Contains(syncOut, []byte("ckpt.pt")) {
		t.Fatalf("strata sync should report the write that was not uploaded: %v\n%s", err, syncOut)
	}
	if kept := keptCopies(t, cacheDir); kept == 0 {
		t.Fatal("the staged bytes of the failed write were not kept")
	}
}

// TestWriteAsyncUploadsAtLastClose: with --upload async nothing goes up at
// a close while the file is still open elsewhere: a dup'd descriptor
// closed halfway through publishes no prefix. The upload starts at the
// last close, or at fsync.
func TestWriteAsyncUploadsAtLastClose(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async")
	part1, part2 := randData(80, 3<<20), randData(81, 2<<20)
	whole := append(append([]byte(nil), part1...), part2...)
	g := guardBucket(t, w, "half.bin", "", sha(whole))
	f, err := os.Create(filepath.Join(m.dir, "half.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(part1); err != nil {
		t.Fatal(err)
	}
	dup, _ := syscall.Dup(int(f.Fd()))
	if err := syscall.Close(dup); err != nil {
		t.Fatalf("close of the dup: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // an upload started now would land
	if _, err := f.Write(part2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runSync(t, m)
	if got, _, err := bucketSHA(t, w, "half.bin"); err != nil || got != sha(whole) {
		t.Fatalf("after the last close: %v", err)
	}
	g.check()

	// fsync publishes while the file is open.
	f, err = os.Create(filepath.Join(m.dir, "synced.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(part1); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := bucketSHA(t, w, "synced.bin"); err != nil || got != sha(part1) {
		t.Fatalf("after fsync: %v", err)
	}
}

// exitWithThreads exits normally (exit_group) while eight threads sleep:
// the kernel takes those down with SIGKILL, and the last of them to go
// releases the descriptors the process inherited.
const exitWithThreads = `
import os, threading, time
for _ in range(8):
    threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
time.sleep(0.05)
os._exit(0)
`

// TestAChildWithThreadsExitingIsNoKilledWriter: a process writing a file
// starts a child that inherits the descriptor (a subprocess without
// close_fds, a Go program's exec of a tool) and runs threads; the child
// exits normally. Its threads are taken down by the kernel with SIGKILL as
// part of that exit, and the close of the inherited copy came from one of
// them: it was taken for a writer killed mid-write, so the file was kept
// aside and never uploaded, and it vanished from its name (found by
// TestRandomCallsMatchLocalDisk, whose `strata sync` inherited a dup'd
// descriptor).
func TestAChildWithThreadsExitingIsNoKilledWriter(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			part1, part2 := randData(60, 1<<20), randData(61, 1<<20)
			f, err := os.Create(filepath.Join(m.dir, "out.bin"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(part1); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				child := exec.Command("python3", "-c", exitWithThreads)
				child.ExtraFiles = []*os.File{f}
				if out, err := child.CombinedOutput(); err != nil {
					t.Fatalf("child: %v\n%s", err, out)
				}
			}
			if _, err := f.Write(part2); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			runSync(t, m)
			whole := append(append([]byte(nil), part1...), part2...)
			if got, n, err := bucketSHA(t, w, "out.bin"); err != nil || got != sha(whole) {
				t.Errorf("the bucket holds %d bytes (%v), want the whole file", n, err)
			}
			if got, err := os.ReadFile(filepath.Join(m.dir, "out.bin")); err != nil || !bytes.Equal(got, whole) {
				t.Errorf("the mount reads %d bytes (%v), want the whole file", len(got), err)
			}
			if us := listUploads(t, m); len(us) != 0 {
				t.Errorf("uploads left: %+v", us)
			}
		})
	}
}
