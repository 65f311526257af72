package integration

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// Passthrough writes: with --upload async a file created on the mount is
// written by the kernel straight into its staging file. The daemon
// answers no WRITE for it ("writes" in `strata cache stats`), yet stat
// shows its size as it grows, a reader sees what is written, every close
// is durable and journaled, the upload waits for the last close, and a
// restart never uploads what no close acknowledged.

// ptWriteStats is the write side of `strata cache stats --json`.
func ptWriteStats(t *testing.T, srv server, cacheDir string) (writes, ptCreates int64) {
	t.Helper()
	c := cacheStatsLive(t, srv, cacheDir)
	if !c.Session.Passthrough {
		t.Fatal("the mount did not get FUSE passthrough (Linux 6.9+ and root are required)")
	}
	return c.Session.Writes, c.Session.PTWriteOpens
}

func TestPassthroughWrites(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async", "--upload-delay", "0")
	if err := os.Mkdir(filepath.Join(m.dir, "ckpt"), 0o755); err != nil {
		t.Fatal(err)
	}
	writes0, pt0 := ptWriteStats(t, srv, cacheDir)

	const size = 48 << 20
	data := randData(501, size)
	p := filepath.Join(m.dir, "ckpt", "model.pt")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < size; off += 1 << 20 {
		if _, err := f.Write(data[off : off+1<<20]); err != nil {
			t.Fatal(err)
		}
		if off%(8<<20) != 0 {
			continue
		}
		// stat by path and a reader of its own see what is written.
		done := off + 1<<20
		if fi, err := os.Stat(p); err != nil || fi.Size() != int64(done) {
			t.Fatalf("stat after %d bytes written: %v, %v", done, fi.Size(), err)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data[:done]) {
			t.Fatalf("a reader after %d bytes written got %d bytes (equal %v): %v", done, len(got), bytes.Equal(got, data[:done]), err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	writes, pt := ptWriteStats(t, srv, cacheDir)
	if pt-pt0 != 1 || writes != writes0 {
		t.Fatalf("passthrough writes: %d files created by passthrough (want 1), %d FUSE WRITEs answered (want 0)", pt-pt0, writes-writes0)
	}
	runSync(t, m)
	if got, n, err := bucketSHA(t, w, "ckpt/model.pt"); err != nil || got != sha(data) || n != size {
		t.Fatalf("in the bucket: %d bytes, equal %v: %v", n, got == sha(data), err)
	}
	if h, _, err := fileSHA(p); err != nil || h != sha(data) {
		t.Fatalf("read back: %v", err)
	}

	// A truncating rewrite of an existing file (torch.save over last
	// epoch's checkpoint: open(O_WRONLY|O_CREAT|O_TRUNC)) is written by
	// the kernel too.
	rewrite := randData(502, 3<<20)
	if err := os.WriteFile(p, rewrite, 0o644); err != nil {
		t.Fatal(err)
	}
	writes2, pt2 := ptWriteStats(t, srv, cacheDir)
	if pt2-pt != 1 || writes2 != writes {
		t.Fatalf("a truncating rewrite: %d passthrough write opens (want 1), %d FUSE WRITEs answered (want 0)", pt2-pt, writes2-writes)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, rewrite) {
		t.Fatalf("read back after the rewrite: %d bytes, equal %v: %v", len(got), bytes.Equal(got, rewrite), err)
	}
	runSync(t, m)
	if got, n, err := bucketSHA(t, w, "ckpt/model.pt"); err != nil || got != sha(rewrite) || n != int64(len(rewrite)) {
		t.Fatalf("rewritten in the bucket: %d bytes, equal %v: %v", n, got == sha(rewrite), err)
	}

	// A rewrite that keeps the content (no O_TRUNC: dd conv=notrunc)
	// goes through strata, which stages what is there first.
	g, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("patched"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if writes3, _ := ptWriteStats(t, srv, cacheDir); writes3 == writes2 {
		t.Fatal("a rewrite in place answered no WRITE: it should take the userspace path")
	}
	copy(rewrite[1<<20:], "patched")
	runSync(t, m)
	if got, _, err := bucketSHA(t, w, "ckpt/model.pt"); err != nil || got != sha(rewrite) {
		t.Fatalf("patched in place: %v", err)
	}
}

// TestPassthroughWriteRestart: a close of a dup'd descriptor journals the
// file; if the mount is then killed, the next mount uploads it when
// nothing was written after that close, and keeps it aside, uploading
// nothing, when something was.
func TestPassthroughWriteRestart(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, tc := range []struct {
		name       string
		writeAfter bool
	}{{"unchanged", false}, {"written-after-close", true}} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			be := w.(backend.Backend)
			cacheDir := t.TempDir()
			m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async")
			_, pt0 := ptWriteStats(t, srv, cacheDir)
			part1, part2 := randData(510, 5<<20), randData(511, 3<<20)
			f, err := os.Create(filepath.Join(m.dir, "ckpt.bin"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(part1); err != nil {
				t.Fatal(err)
			}
			dup, _ := syscall.Dup(int(f.Fd()))
			if err := syscall.Close(dup); err != nil { // journals part1, held
				t.Fatalf("close of the dup: %v", err)
			}
			// Before the last write: the exec of strata closes its inherited
			// copy of f, a close like any other.
			if _, pt := ptWriteStats(t, srv, cacheDir); pt != pt0+1 {
				t.Fatal("the file was not written by passthrough")
			}
			if tc.writeAfter {
				if _, err := f.Write(part2); err != nil {
					t.Fatal(err)
				}
			}
			m.kill9()
			f.Close() // ENOTCONN: the mount is gone
			if _, err := be.Stat(t.Context(), "ckpt.bin"); !errors.Is(err, backend.ErrNotExist) {
				t.Fatalf("ckpt.bin reached the bucket before its last close: %v", err)
			}
			m2 := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async")
			out, err := exec.Command(binPath(t), "sync", m2.dir).CombinedOutput()
			if !tc.writeAfter {
				if err != nil {
					t.Fatalf("strata sync after restart: %v\n%s", err, out)
				}
				if got, _, err := bucketSHA(t, w, "ckpt.bin"); err != nil || got != sha(part1) {
					t.Fatalf("the close acknowledged before the kill did not reach the bucket: %v", err)
				}
				return
			}
			if err == nil || !bytes.Contains(out, []byte("ckpt.bin")) {
				t.Fatalf("strata sync should report the file kept aside: %v\n%s", err, out)
			}
			if _, err := be.Stat(t.Context(), "ckpt.bin"); !errors.Is(err, backend.ErrNotExist) {
				t.Fatalf("a file written after its last acknowledged close was uploaded: %v", err)
			}
			if keptCopies(t, cacheDir) == 0 {
				t.Fatal("the bytes were not kept")
			}
		})
	}
}

// TestPassthroughWriteDiskNearlyFull: a file written by passthrough while
// the cache disk runs full is never uploaded (the kernel's failed write
// does not reach strata); its bytes are kept and reported, and new files
// go through strata until there is room again.
func TestPassthroughWriteDiskNearlyFull(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	be := w.(backend.Backend)
	disk := tmpfs(t, 1600<<20)
	cacheDir := filepath.Join(disk, "cache")
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async", "--upload-delay", "0",
		"--cache-size", "8GiB", "--log-file", filepath.Join(t.TempDir(), "strata.log"))
	_, pt0 := ptWriteStats(t, srv, cacheDir)
	f, err := os.Create(filepath.Join(m.dir, "big.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	_, werr := io.Copy(onlyWriter{f}, newStream(520, 4<<30))
	cerr := f.Close()
	if _, pt := ptWriteStats(t, srv, cacheDir); pt != pt0+1 {
		t.Fatal("the file was not written by passthrough")
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing 4 GiB on a 1.6 GB disk: %v (want ENOSPC)", werr)
	}
	if !errors.Is(cerr, syscall.ENOSPC) {
		t.Fatalf("close after ENOSPC: %v (want ENOSPC: the file is not uploaded)", cerr)
	}
	out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("big.ckpt")) {
		t.Fatalf("strata sync should report the file that was not uploaded: %v\n%s", err, out)
	}
	if _, err := be.Stat(t.Context(), "big.ckpt"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("a file whose writes failed reached the bucket: %v", err)
	}
	if keptCopies(t, cacheDir) == 0 {
		t.Fatal("the bytes were not kept")
	}
	// Room again: the kept copy is removed by hand, and a new file is
	// written (by passthrough again once the disk has room) and uploaded.
	ents, _ := os.ReadDir(filepath.Join(cacheDir, "failed-writes"))
	for _, e := range ents {
		os.Remove(filepath.Join(cacheDir, "failed-writes", e.Name()))
	}
	// The kept copy is on the list (and in failed-writes) as soon as the
	// file's last release sets it aside, a moment before the daemon and
	// the kernel let go of it (its descriptor, its backing registration,
	// closed as that release returns): its space comes back then, not at
	// the unlink. On a loaded machine that moment is long enough for a
	// write straight after the unlink to find the disk still full (this
	// test failed so once; with the release held back 500 ms, every
	// time), so wait for the room, as a user who looks at df would.
	waitFree(t, disk, 1<<30+64<<20, 10*time.Second)
	data := randData(521, 4<<20)
	if err := os.WriteFile(filepath.Join(m.dir, "after.ckpt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// strata sync still reports big.ckpt (until `strata uploads --discard`).
	out, _ = exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
	if got, _, err := bucketSHA(t, w, "after.ckpt"); err != nil || got != sha(data) {
		t.Fatalf("after.ckpt: %v\n%s", err, out)
	}
}

// TestPassthroughRewrites: a truncating rewrite written by passthrough
// keeps the guarantees of a created file. A second open(O_TRUNC) while the
// file is being written truncates what the first writer wrote, as on a
// local disk; a rewrite killed before its close leaves the previous object
// in the bucket and uploads nothing.
func TestPassthroughRewrites(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async", "--upload-delay", "0")
	p := filepath.Join(m.dir, "last.pt")
	v1 := randData(520, 4<<20)
	if err := os.WriteFile(p, v1, 0o644); err != nil {
		t.Fatal(err)
	}
	runSync(t, m)

	// Writer A rewrites the file (passthrough) and keeps it open; B
	// opens it with O_TRUNC meanwhile and writes "hello".
	_, pt0 := ptWriteStats(t, srv, cacheDir)
	a, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(randData(521, 2<<20)); err != nil {
		t.Fatal(err)
	}
	if _, pt := ptWriteStats(t, srv, cacheDir); pt != pt0+1 {
		t.Fatalf("the rewrite was not written by passthrough (%d passthrough write opens)", pt-pt0)
	}
	b, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 0 {
		t.Fatalf("after the second open(O_TRUNC): size %v, %v; want 0", fi.Size(), err)
	}
	if _, err := b.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	runSync(t, m)
	if got, err := os.ReadFile(p); err != nil || string(got) != "hello" {
		t.Fatalf("read back %q, %v; want hello", got, err)
	}
	if got, n, err := bucketSHA(t, w, "last.pt"); err != nil || got != sha([]byte("hello")) {
		t.Fatalf("in the bucket: %d bytes, %v; want hello", n, err)
	}

	// A rewrite killed mid-file: the bucket keeps "hello", nothing else is
	// uploaded after the restart, and the bytes are kept aside.
	c, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(randData(522, 3<<20)); err != nil {
		t.Fatal(err)
	}
	m.kill9()
	c.Close() // ENOTCONN: the mount is gone
	m2 := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async", "--upload-delay", "0")
	_ = exec.Command(binPath(t), "sync", m2.dir).Run() // its answer is not the point: the state is checked below
	if got, n, err := bucketSHA(t, w, "last.pt"); err != nil || got != sha([]byte("hello")) {
		t.Fatalf("after a rewrite killed before its close the bucket holds %d bytes (%v); want the previous object", n, err)
	}
	if got, err := os.ReadFile(filepath.Join(m2.dir, "last.pt")); err != nil || string(got) != "hello" {
		t.Fatalf("after the restart the mount reads %d bytes, %v; want the previous object", len(got), err)
	}
}

// waitFree waits until the filesystem holding dir has want bytes free,
// failing the test after limit.
func waitFree(t *testing.T, dir string, want int64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		free := int64(st.Bavail) * st.Bsize
		if free >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the kept copy was removed, %s has %d MiB free, want %d MiB: the daemon still holds the file", limit, dir, free>>20, want>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
