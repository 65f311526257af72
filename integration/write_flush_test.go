package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// bucketGuard polls key in the bucket for the whole of a test and records
// every content it sees that is not one the writer meant (allowed: sha256
// of each acceptable content; "" allows the key to be absent).
type bucketGuard struct {
	t       *testing.T
	be      backend.Backend
	key     string
	allowed map[string]bool
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	bad     []string
	seen    int
}

func guardBucket(t *testing.T, w backend.Writer, key string, allowed ...string) *bucketGuard {
	g := &bucketGuard{t: t, be: w.(backend.Backend), key: key, allowed: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, a := range allowed {
		g.allowed[a] = true
	}
	go g.run()
	t.Cleanup(g.halt)
	return g
}

func (g *bucketGuard) run() {
	defer close(g.done)
	var last backend.ObjectInfo
	for {
		select {
		case <-g.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		ctx := context.Background()
		info, err := g.be.Stat(ctx, g.key)
		if errors.Is(err, backend.ErrNotExist) {
			if !g.allowed[""] {
				g.record("absent")
			}
			last = backend.ObjectInfo{}
			continue
		}
		if err != nil || (info.Size == last.Size && info.Version == last.Version && info.MTime.Equal(last.MTime)) {
			continue
		}
		last = info
		h := sha256.New()
		if info.Size > 0 {
			r, err := g.be.ReadRange(ctx, g.key, info.Version, 0, info.Size)
			if err != nil {
				continue // replaced meanwhile: the next poll sees the new one
			}
			_, err = io.Copy(h, r)
			r.Close()
			if err != nil {
				continue
			}
		}
		g.mu.Lock()
		g.seen++
		g.mu.Unlock()
		if s := hex.EncodeToString(h.Sum(nil)); !g.allowed[s] {
			g.record(fmt.Sprintf("%d bytes (sha %.12s)", info.Size, s))
		}
	}
}

func (g *bucketGuard) record(what string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bad = append(g.bad, what)
}

func (g *bucketGuard) halt() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

// check stops the guard and fails the test if the bucket ever held an
// object the writer did not mean.
func (g *bucketGuard) check() {
	g.t.Helper()
	g.halt()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) > 0 {
		g.t.Fatalf("the bucket held %d unintended objects at %s, first: %s", len(g.bad), g.key, g.bad[0])
	}
	if g.seen == 0 {
		g.t.Fatalf("the guard never read %s", g.key)
	}
}

// writerHelper is a Python process that writes src to dst in 1 MiB writes
// and, after at bytes, does what (fork: a forked child closes its copy and
// exits, then a spawned child drops its close-on-exec copy at exec; stop:
// prints "stopped" and waits to be killed; closestop: closes its
// descriptor after a dup of it, writes 1 MiB more through the dup, then
// stops as stop does). The parent pauses after each
// step so that a wrong upload would stay in the bucket long enough to see.
const writerHelper = `
import os, sys, time, subprocess
src, dst, at, what = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
data = open(src, "rb").read()
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
off = 0
def write_to(end):
    global off
    while off < end:
        off += os.write(fd, data[off:min(off + (1 << 20), end)])
write_to(at)
if what == "fork":
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.3)
    subprocess.run(["true"], check=True)
    time.sleep(0.3)
elif what == "closestop":
    fd2 = os.dup(fd)
    os.close(fd)
    fd = fd2
    write_to(at + (1 << 20))
if what in ("stop", "closestop"):
    print("stopped", flush=True)
    time.sleep(3600)
write_to(len(data))
os.close(fd)
`

func runWriterHelper(t *testing.T, src, dst string, at int, what string) *exec.Cmd {
	t.Helper()
	return exec.Command("python3", "-c", writerHelper, src, dst, fmt.Sprint(at), what)
}

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
