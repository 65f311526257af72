package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestEveryFsyncUploads: each fsync of a file being written uploads what
// is written by then and returns once it is in the bucket, in both upload
// modes (README, write semantics: "fsync | uploads what is written and
// waits"), the second and third fsync of one descriptor as the first. In
// async mode the file is written by passthrough.
func TestEveryFsyncUploads(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t)
	for _, mode := range []string{"async", "sync"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			// As Python opens a file for writing ("wb"): O_RDWR (Go's
			// os.Create) takes the userspace path.
			f, err := os.OpenFile(filepath.Join(m.dir, "log.bin"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			data := randData(61, 3000)
			for i := 1; i <= 3; i++ {
				if _, err := f.Write(data[(i-1)*1000 : i*1000]); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatalf("fsync %d: %v", i, err)
				}
				got, n, err := bucketSHA(t, w, "log.bin")
				if err != nil || got != sha(data[:i*1000]) {
					t.Fatalf("after fsync %d the bucket holds %d bytes (want the %d written, equal %v): %v",
						i, n, i*1000, got == sha(data[:i*1000]), err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCloseAfterFsyncUploadsNothingNew: a close that follows an fsync with
// no write in between carries no new data, so it uploads nothing (issue
// #13: "never an upload for a FLUSH that carries no new data"), in both
// modes: the common atomic save (write, fsync, close, rename) sends the
// file once. A write between the fsync and the close, even in place at
// the same size, is uploaded.
func TestCloseAfterFsyncUploadsNothingNew(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t)
	for _, mode := range []string{"async", "sync"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			addr := metricsAddr(t)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode, "--metrics-addr", addr)
			puts := func() float64 {
				if out, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
					t.Fatalf("strata sync: %v\n%s%s", err, out, errOut)
				}
				return metric(scrape(t, addr), "strata_backend_requests_total", map[string]string{"op": "put", "status": "ok"})
			}
			// As Python writes ("wb"), so that async takes the passthrough path.
			save := func(name string, data []byte, after func(f *os.File)) {
				f, err := os.OpenFile(filepath.Join(m.dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				after(f)
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			inBucket := func(key string, want []byte) {
				t.Helper()
				if got, n, err := bucketSHA(t, w, key); err != nil || got != sha(want) {
					t.Fatalf("the bucket's %s: %d bytes, equal %v, %v (want the %d written)", key, n, got == sha(want), err, len(want))
				}
			}
			before := puts()

			data := randData(71, 3<<20)
			save("tmp.bin", data, func(*os.File) {})
			if got := puts() - before; got != 1 {
				t.Errorf("write, fsync, close sent %v PUTs; want 1 (the close added nothing to the fsync's upload)", got)
			}
			inBucket("tmp.bin", data)
			if err := os.Rename(filepath.Join(m.dir, "tmp.bin"), filepath.Join(m.dir, "final.bin")); err != nil {
				t.Fatal(err)
			}
			if got := puts() - before; got != 1 {
				t.Errorf("the rename of a file already in the bucket sent %v PUTs in all; want 1 (a server-side copy)", got)
			}
			inBucket("final.bin", data)
			if got, err := os.ReadFile(filepath.Join(m.dir, "final.bin")); err != nil || sha(got) != sha(data) {
				t.Fatalf("the mount's final.bin: %d bytes, equal %v, %v", len(got), sha(got) == sha(data), err)
			}

			// A close of a dup after the fsync is not the last: the
			// writes after it are uploaded at the last close, once.
			before = puts()
			more := randData(73, 1<<20)
			save("dup.bin", data, func(f *os.File) {
				if err := f.Sync(); err != nil { // a second fsync with nothing new
					t.Fatal(err)
				}
				fd, err := syscall.Dup(int(f.Fd()))
				if err != nil {
					t.Fatal(err)
				}
				if err := syscall.Close(fd); err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(more); err != nil {
					t.Fatal(err)
				}
			})
			if got := puts() - before; got != 2 {
				t.Errorf("write, fsync, fsync, close of a dup, write, close sent %v PUTs; want 2", got)
			}
			inBucket("dup.bin", append(append([]byte{}, data...), more...))

			// A write after the fsync, in place and at the same size,
			// is new data: the close uploads it.
			before = puts()
			changed := randData(72, 3<<20)
			save("changed.bin", data, func(f *os.File) {
				if _, err := f.WriteAt(changed[:4096], 0); err != nil {
					t.Fatal(err)
				}
			})
			if got := puts() - before; got != 2 {
				t.Errorf("write, fsync, write, close sent %v PUTs; want 2", got)
			}
			inBucket("changed.bin", append(append([]byte{}, changed[:4096]...), data[4096:]...))
		})
	}
}

// TestSubprocessesElsewhereDoNotResendASyncedFile: a program starts
// subprocesses on one thread (Go's os/exec, or any runtime that leaves
// descriptors to close-on-exec) while another saves files the atomic way
// (write, fsync, close, rename). A child started after the write inherits
// the open file until its exec closes it, and the daemon's check that the
// closer was not killed waited on that exec (reading /proc of a task in
// execve blocks, up to procReadWait): the child's close landed after the
// rename, found no upload standing for it, and sent the file again (the
// parallel subtests of TestCloseAfterFsyncUploadsNothingNew, 3 runs in 8).
// A close with nothing written since the fsync's copy needs no such check.
func TestSubprocessesElsewhereDoNotResendASyncedFile(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async", "--metrics-addr", addr)
	puts := func() float64 {
		if out, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
			t.Fatalf("strata sync: %v\n%s%s", err, out, errOut)
		}
		return metric(scrape(t, addr), "strata_backend_requests_total", map[string]string{"op": "put", "status": "ok"})
	}
	const saves = 10
	before := puts()
	for i := range saves {
		data := randData(uint64(80+i), 256<<10)
		tmp, final := filepath.Join(m.dir, fmt.Sprintf("tmp%d", i)), filepath.Join(m.dir, fmt.Sprintf("final%d", i))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		// Subprocesses started by another goroutine from here on, while
		// the file is fsync'd, closed and renamed.
		stop, forked := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(forked)
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = exec.Command("true").Run()
			}
		}()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, final); err != nil {
			t.Fatal(err)
		}
		close(stop)
		<-forked
	}
	if got := puts() - before; got != saves {
		t.Errorf("%d saves sent %v PUTs; want %d (each file once, at its fsync; each rename a server-side copy)", saves, got, saves)
	}
	for i := range saves {
		if _, _, err := bucketSHA(t, w, fmt.Sprintf("final%d", i)); err != nil {
			t.Errorf("final%d: %v", i, err)
		}
	}
}
