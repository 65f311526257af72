package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
)

// TestSaveOverAFileBeingRead: an evaluator holds last epoch's checkpoint
// open, read through passthrough, while the trainer saves the new one over
// it (torch.save: open with O_TRUNC, write, close), and `tail -f` holds a
// log open while the job appends to it. The kernel keeps the reader's
// cache file as the inode's backing file for as long as it is open, so
// the writer cannot have a backing file of its own; its open used to fail
// with EBUSY. Now it succeeds, in both upload modes: the writer's reads
// and writes, and every open made while the old reader stays open, are
// served by the daemon; the old reader keeps the version it opened; the
// bucket gets the new file; and once the old reader is gone, opens are
// passthrough again.
func TestSaveOverAFileBeingRead(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			old := randData(501, 3<<20+5)
			c := mountCachedFile(t, srv, "ckpt.pt", old, "--upload", mode)
			w, m, addr, p := c.w, c.m, c.addr, c.p

			ptOpens := func() float64 { return metric(scrape(t, addr), "strata_fs_passthrough_opens_total", nil) }
			before := ptOpens()
			reader, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			if d := ptOpens() - before; d != 1 {
				t.Fatalf("the reader's open of a fully cached file: passthrough opens +%v, want +1", d)
			}
			checkAt := func(what string, off int64, want []byte) {
				t.Helper()
				got := make([]byte, 64<<10)
				n, err := reader.ReadAt(got, off)
				if n != len(got) || !bytes.Equal(got, want[off:off+int64(len(got))]) {
					t.Fatalf("%s: the reader opened before the save read %d bytes at %d that are not the version it opened: %v", what, n, off, err)
				}
			}
			checkAt("before the save", 0, old)

			saved := randData(502, 2<<20+3)
			start := time.Now()
			if err := os.WriteFile(p, saved, 0o644); err != nil {
				t.Fatalf("saving over a file another process reads: %v (after %v)", err, time.Since(start))
			}
			readWhole(t, p, saved)
			if st, err := os.Stat(p); err != nil || st.Size() != int64(len(saved)) {
				t.Fatalf("stat after the save: %v, %v; want %d bytes", st, err, len(saved))
			}
			checkAt("after the save", 1<<20, old)

			// The log a `tail -f` holds open: appends, each its own open.
			want := saved
			for i := range 3 {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatalf("append %d while the old reader is open: %v", i, err)
				}
				line := []byte{'l', byte('0' + i), '\n'}
				if _, err := f.Write(line); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatalf("close of append %d: %v", i, err)
				}
				want = append(want, line...)
			}
			readWhole(t, p, want)
			checkAt("after the appends", 2<<20, old)

			runSync(t, m)
			if got, n, err := bucketSHA(t, w, "ckpt.pt"); err != nil || got != sha(want) {
				t.Fatalf("the bucket holds %d bytes, want the %d written: %v", n, len(want), err)
			}
			readWhole(t, p, want)

			// The old reader goes: opens are handed to the kernel again
			// (its RELEASE reaches the daemon a moment after close).
			if err := reader.Close(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				before := ptOpens()
				readWhole(t, p, want)
				if ptOpens()-before == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("10 s after the old reader closed, opens of the saved file are still not passthrough")
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestMappedWriteBesideAPassthroughReader: a writer's open beside a
// passthrough reader names the reader's backing file, the cached copy of
// the bucket's version, and the kernel maps that file for a memory
// mapping of the writer's. Its stores through a shared mapping change the
// cached copy behind Strata's back, and are not uploaded (the README says
// so). The cached copy must never be served as the bucket's version after
// that: once the reader is gone, the file reads as the bucket holds it.
func TestMappedWriteBesideAPassthroughReader(t *testing.T) {
	requireFUSE(t)
	data := randData(503, 2<<20)
	c := mountCachedFile(t, startMinIO(t), "weights.bin", data)
	w, p := c.w, c.p

	reader, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		reader.Close()
		t.Fatalf("open for writing beside a passthrough reader: %v", err)
	}
	mem, err := syscall.Mmap(int(writer.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	copy(mem[4096:], "stored through a mapping")
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	if err := writer.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}

	// The RELEASEs reach the daemon a moment after close: every read from
	// here on, passthrough or not, must be the bucket's bytes.
	readsAcrossReleases(t, p, data)
	if got, _, err := bucketSHA(t, w, "weights.bin"); err != nil || got != sha(data) {
		t.Fatalf("the bucket's object changed: %v", err)
	}
}

// TestTruncateBesideAPassthroughReader: `truncate -s N f` (a SETATTR with
// no open file) while another process reads f through passthrough. The
// kernel keeps that reader's cache file as the inode's backing file, so
// the opens that follow must not be handed to the kernel, which would
// read them from it: they read the truncated file.
func TestTruncateBesideAPassthroughReader(t *testing.T) {
	requireFUSE(t)
	data := randData(504, 1<<20+7)
	c := mountCachedFile(t, startMinIO(t), "run.log", data)
	w, m, p := c.w, c.m, c.p

	reader, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := os.Truncate(p, 1000); err != nil {
		t.Fatalf("truncate beside a passthrough reader: %v", err)
	}
	for range 3 {
		dropCaches(t)
		readWhole(t, p, data[:1000])
	}
	runSync(t, m)
	if got, n, err := bucketSHA(t, w, "run.log"); err != nil || got != sha(data[:1000]) {
		t.Fatalf("the bucket holds %d bytes, want 1000: %v", n, err)
	}
}

// TestDiscardBesideAPassthroughReader: a file saved over with --upload
// async and read back through passthrough while its upload waits (the
// reader holds the saved bytes' staging file as the inode's backing
// file); `strata uploads --discard` then gives the upload up, and the file
// must read as the bucket's version again, to every open, while that
// reader is still open, not as the discarded bytes the kernel would read
// from the backing file.
func TestDiscardBesideAPassthroughReader(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	old := randData(505, 1<<20+9)
	put(t, w, map[string][]byte{"ckpt.pt": old})
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async", "--upload-delay", "10m", "--metrics-addr", addr, "--passthrough", "on")
	p := filepath.Join(m.dir, "ckpt.pt")
	saved := randData(506, 512<<10)
	if err := os.WriteFile(p, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	readWhole(t, p, saved) // the writer's RELEASE is through once this opens
	reader, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if out, err := exec.Command(binPath(t), "uploads", "--discard", m.dir, "ckpt.pt").CombinedOutput(); err != nil {
		t.Fatalf("strata uploads --discard: %v\n%s", err, out)
	}
	for range 3 {
		dropCaches(t)
		readWhole(t, p, old)
	}
}

// cachedFile is a mount (passthrough on, with extra flags) of a bucket
// holding key = data, with key read once and fully cached, so that its
// next open is a passthrough one.
type cachedFile struct {
	w    backend.Writer
	m    *mount
	addr string // the mount's metrics address
	p    string // key's path in the mount
}

func mountCachedFile(t *testing.T, srv server, key string, data []byte, extra ...string) cachedFile {
	t.Helper()
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	put(t, w, map[string][]byte{key: data})
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", append([]string{"--metrics-addr", addr, "--passthrough", "on"}, extra...)...)
	p := filepath.Join(m.dir, key)
	readWhole(t, p, data)
	waitWritten(t, addr, int64(len(data)))
	return cachedFile{w: w, m: m, addr: addr, p: p}
}

// readsAcrossReleases reads p again and again, page cache dropped, for a
// second after the last handle on it closed: its RELEASE reaches the
// daemon a moment after close() returns, and every read, passthrough or
// not, before or after it, must be want.
func readsAcrossReleases(t *testing.T, p string, want []byte) {
	t.Helper()
	for range 20 {
		dropCaches(t)
		readWhole(t, p, want)
		time.Sleep(50 * time.Millisecond)
	}
}
