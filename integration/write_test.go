package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/internal/testserver"
)

// bucketSHA reads key straight from the bucket (not through the mount).
func bucketSHA(t *testing.T, w backend.Writer, key string) (string, int64, error) {
	t.Helper()
	be := w.(backend.Backend)
	info, err := be.Stat(context.Background(), key)
	if err != nil {
		return "", 0, err
	}
	if info.Size == 0 {
		return sha(nil), 0, nil
	}
	r, err := be.ReadRange(context.Background(), key, "", 0, info.Size)
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// writeFile writes data to p in 1 MiB writes and closes it, like a
// checkpoint writer, returning how long close took.
func writeFile(p string, data []byte) (time.Duration, error) {
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	for off := 0; off < len(data); off += 1 << 20 {
		if _, err := f.Write(data[off:min(off+1<<20, len(data))]); err != nil {
			f.Close()
			return 0, err
		}
	}
	start := time.Now()
	err = f.Close()
	return time.Since(start), err
}

func TestWriteSizesReachTheBucket(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		m := startMount(t, srv, srv.source(bucket, "ckpt"), "")
		sizes := []int{0, 1, 5 << 20, 100 << 20, 1 << 30}
		if testing.Short() {
			sizes = sizes[:3]
		}
		for _, size := range sizes {
			seed, n64 := uint64(size), int64(size)
			want := streamSHA(seed, n64)
			name := fmt.Sprintf("f-%d", size)
			if _, err := writeStream(filepath.Join(m.dir, name), seed, n64); err != nil {
				t.Fatalf("write %s: %v", name, err)
			}
			got, n, err := bucketSHA(t, w, "ckpt/"+name)
			if err != nil || got != want || n != n64 {
				t.Fatalf("%s in the bucket: %d bytes, sha ok=%v, %v", name, n, got == want, err)
			}
			// Reading it back is a local read: the written file is the cached copy.
			before, _ := readSessionNow(t, m)
			if got, _, err := fileSHA(filepath.Join(m.dir, name)); err != nil || got != want {
				t.Fatalf("read back %s: %v", name, err)
			}
			if after, _ := readSessionNow(t, m); after.FetchedBytes != before.FetchedBytes {
				t.Fatalf("reading back %s fetched %d bytes", name, after.FetchedBytes-before.FetchedBytes)
			}
		}
	})
}

// readSessionNow waits for the mount's next session refresh and reads it.
func readSessionNow(t *testing.T, m *mount) (session, bool) {
	t.Helper()
	old, _ := os.Stat(filepath.Join(m.cacheDir, "session.json"))
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := os.Stat(filepath.Join(m.cacheDir, "session.json")); err == nil && (old == nil || st.ModTime().After(old.ModTime())) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return readSession(m.cacheDir)
}

func TestRandomWritesAppendTruncate(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		base := randData(1, 3<<20)
		put(t, w, map[string][]byte{"f": base})
		m := startMount(t, srv, srv.source(bucket, ""), "")
		want := append([]byte(nil), base...)
		f, err := os.OpenFile(filepath.Join(m.dir, "f"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(3, 4))
		for range 50 {
			off := r.IntN(len(want) + 1000)
			p := randData(r.Uint64(), 1+r.IntN(70000))
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
			if end := off + len(p); end > len(want) {
				want = append(want, make([]byte, end-len(want))...)
			}
			copy(want[off:], p)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got, _, err := bucketSHA(t, w, "f"); err != nil || got != sha(want) {
			t.Fatalf("random writes: sha ok=%v %v", got == sha(want), err)
		}
		// Append, then truncate by path.
		a, err := os.OpenFile(filepath.Join(m.dir, "f"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Write([]byte("tail")); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		want = append(want, "tail"...)
		if got, _, _ := bucketSHA(t, w, "f"); got != sha(want) {
			t.Fatal("append not in the bucket")
		}
		if err := os.Truncate(filepath.Join(m.dir, "f"), 1000); err != nil {
			t.Fatal(err)
		}
		if got, n, _ := bucketSHA(t, w, "f"); got != sha(want[:1000]) || n != 1000 {
			t.Fatalf("truncate: %d bytes in the bucket", n)
		}
	})
}

func TestWriteTempThenRename(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		put(t, w, map[string][]byte{"ckpt/latest.pt": []byte("old checkpoint")})
		for _, mode := range []string{"sync", "async"} {
			t.Run(mode, func(t *testing.T) {
				m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
				data := randData(9, 9<<20+17)
				tmp, final := filepath.Join(m.dir, "ckpt", ".latest.pt.tmp"), filepath.Join(m.dir, "ckpt", "latest.pt")
				if _, err := writeFile(tmp, data); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, final); err != nil {
					t.Fatal(err)
				}
				// The rename's lookup of the old latest.pt may have read its
				// 14 bytes (--lookup-fetch): count from here.
				before, _ := readSessionNow(t, m)
				if b, err := os.ReadFile(final); err != nil || !bytes.Equal(b, data) {
					t.Fatalf("read after rename: %v", err)
				}
				if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("tmp still there: %v", err)
				}
				runSync(t, m)
				if got, _, err := bucketSHA(t, w, "ckpt/latest.pt"); err != nil || got != sha(data) {
					t.Fatalf("final in the bucket: %v", err)
				}
				if _, _, err := bucketSHA(t, w, "ckpt/.latest.pt.tmp"); !errors.Is(err, backend.ErrNotExist) {
					t.Fatalf("tmp left in the bucket: %v", err)
				}
				s, _ := readSessionNow(t, m)
				if n := s.FetchedBytes - before.FetchedBytes; n != 0 {
					t.Fatalf("reading the renamed checkpoint fetched %d bytes", n)
				}
			})
		}
	})
}

// runSync runs `strata sync` on the mount.
func runSync(t *testing.T, m *mount) string {
	t.Helper()
	out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("strata sync: %v\n%s", err, out)
	}
	return string(out)
}

func TestShardedCheckpointByEightProcesses(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async")
		src := t.TempDir()
		want := map[string]string{}
		for i := range 64 {
			data := randData(uint64(1000+i), 256<<10+i*1001)
			name := fmt.Sprintf("shard-%02d-of-64.safetensors", i)
			if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			want[name] = sha(data)
		}
		if err := os.Mkdir(filepath.Join(m.dir, "step_1000"), 0o755); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for p := range 8 {
			var files []string
			for i := p; i < 64; i += 8 {
				files = append(files, filepath.Join(src, fmt.Sprintf("shard-%02d-of-64.safetensors", i)))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if out, err := exec.Command("cp", append(files, filepath.Join(m.dir, "step_1000"))...).CombinedOutput(); err != nil {
					t.Errorf("writer process %d: %v %s", p, err, out)
				}
			}()
		}
		wg.Wait()
		runSync(t, m)
		for name, h := range want {
			if got, _, err := bucketSHA(t, w, "step_1000/"+name); err != nil || got != h {
				t.Errorf("%s: %v", name, err)
			}
		}
		if d := diffTrees(want, tree(t, filepath.Join(m.dir, "step_1000"))); d != "" {
			t.Fatalf("mount view:\n%s", d)
		}
	})
}

func TestConflictingWriterGetsAnError(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		put(t, w, map[string][]byte{"shared.txt": []byte("v1")})
		m := startMount(t, srv, srv.source(bucket, ""), "")
		f, err := os.OpenFile(filepath.Join(m.dir, "shared.txt"), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("mine")); err != nil {
			t.Fatal(err)
		}
		put(t, w, map[string][]byte{"shared.txt": []byte("someone else's v2")}) // another node wins the race
		if err := f.Close(); !errors.Is(err, syscall.ESTALE) {
			t.Fatalf("close after a conflicting write: %v (want a conflict error)", err)
		}
		if got, _, _ := bucketSHA(t, w, "shared.txt"); got != sha([]byte("someone else's v2")) {
			t.Fatal("the conflicting write clobbered the other writer")
		}
		out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("shared.txt")) {
			t.Fatalf("strata sync should report the failed upload: %v\n%s", err, out)
		}
	})
}

// TestRewriteStillDetectsConflicts: a file written and uploaded from this
// mount, then replaced in the bucket by another node, then written again
// here: the second upload is conditional on the version the first one
// created, so it fails instead of clobbering the other node's object, in
// both modes (sync: close says ESTALE; async: strata sync reports it).
func TestRewriteStillDetectsConflicts(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			put(t, w, map[string][]byte{"shared.txt": []byte("v1")})
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			p := filepath.Join(m.dir, "shared.txt")
			if _, err := writeFile(p, []byte("mine, first")); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
				t.Fatalf("strata sync: %v\n%s", err, out)
			}
			put(t, w, map[string][]byte{"shared.txt": []byte("someone else's v2")})
			_, err := writeFile(p, []byte("mine, second"))
			if mode == "sync" && !errors.Is(err, syscall.ESTALE) {
				t.Fatalf("close of a rewrite over another node's object: %v (want ESTALE)", err)
			}
			if mode == "async" {
				if err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput()
				if err == nil || !bytes.Contains(out, []byte("shared.txt")) {
					t.Fatalf("strata sync should report the conflicting upload: %v\n%s", err, out)
				}
			}
			if got, _, _ := bucketSHA(t, w, "shared.txt"); got != sha([]byte("someone else's v2")) {
				t.Fatal("the rewrite clobbered the other node's object")
			}
		})
	}
}

func TestWriteENOSPCKeepsReads(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	data := randData(5, 2<<20)
	put(t, srv.writer(t, bucket), map[string][]byte{"r.bin": data})
	m := startMount(t, srv, srv.source(bucket, ""), "", "--cache-size", "8MiB")
	_, err := writeFile(filepath.Join(m.dir, "too-big"), make([]byte, 20<<20))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing past the cache size: %v (want ENOSPC)", err)
	}
	if b, err := os.ReadFile(filepath.Join(m.dir, "r.bin")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("read with the cache full of staged data: %v", err)
	}
}

func TestNamespaceOps(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		put(t, w, map[string][]byte{"d/a": []byte("a"), "d/b": []byte("b"), "big/1": {}, "big/2": {}, "big/3": {}})
		m := startMount(t, srv, srv.source(bucket, ""), "", "--rename-dir-limit", "2")
		p := func(s string) string { return filepath.Join(m.dir, s) }
		if err := os.Mkdir(p("empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Rmdir(p("d")); !errors.Is(err, syscall.ENOTEMPTY) {
			t.Fatalf("rmdir of a non-empty dir: %v", err)
		}
		if err := os.Rename(p("d"), p("e")); err != nil {
			t.Fatalf("rename dir within the limit: %v", err)
		}
		if b, err := os.ReadFile(p("e/b")); err != nil || string(b) != "b" {
			t.Fatalf("after dir rename: %q %v", b, err)
		}
		if err := os.Rename(p("big"), p("big2")); !errors.Is(err, syscall.EXDEV) {
			t.Fatalf("rename dir over the limit: %v (want EXDEV)", err)
		}
		if err := os.Remove(p("e/a")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p("e/b"), 0o600); err != nil {
			t.Fatalf("chmod should be accepted: %v", err)
		}
		if err := syscall.Rmdir(p("empty")); err != nil {
			t.Fatal(err)
		}
		// Not supported, with the errno the README's table gives.
		if err := os.Symlink("x", p("link")); !errors.Is(err, syscall.ENOTSUP) {
			t.Fatalf("symlink: %v (want ENOTSUP)", err)
		}
		if err := os.Link(p("e/b"), p("hard")); !errors.Is(err, syscall.ENOTSUP) {
			t.Fatalf("link: %v (want ENOTSUP)", err)
		}
		if err := syscall.Mkfifo(p("fifo"), 0o644); !errors.Is(err, syscall.ENOTSUP) {
			t.Fatalf("mkfifo: %v (want ENOTSUP)", err)
		}
		if f, err := os.OpenFile(p("e/b"), os.O_WRONLY, 0); err != nil {
			t.Fatal(err)
		} else {
			ferr := unix.Fallocate(int(f.Fd()), 0, 0, 1<<20)
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(ferr, syscall.EOPNOTSUPP) {
				t.Fatalf("fallocate: %v (want EOPNOTSUPP)", ferr)
			}
		}
		want := map[string]bool{"e/b": true, "big/1": true, "big/2": true, "big/3": true}
		page, err := w.(backend.Backend).List(context.Background(), "", backend.ListOptions{Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, o := range page.Objects {
			got[o.Key] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("bucket after namespace ops: %v, want %v", got, want)
		}
		if err := unix.Access(p("e/b"), unix.R_OK); err != nil {
			t.Fatal(err)
		}
	})
}

func binPath(t *testing.T) string { return testserver.Binary(t, "strata") }
