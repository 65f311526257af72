package integration

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

func randData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// dataset is the generated tree of the main test: nested directories,
// empty files, files across block boundaries and one 100 MiB file.
func dataset(prefix string, big int) map[string][]byte {
	files := map[string][]byte{
		prefix + "top.txt":             []byte("hello strata\n"),
		prefix + "empty":               {},
		prefix + "d1/empty2":           {},
		prefix + "d1/spaced name.txt":  []byte("spaces are fine"),
		prefix + "d1/ünïcødé.bin":      randData(7, 3000),
		prefix + "d1/d2/d3/deep.bin":   randData(8, 1<<20+1),
		prefix + "d1/d2/exact-1MiB":    randData(9, 1<<20),
		prefix + "big/hundred-mib.bin": randData(10, big),
	}
	for i := range 30 {
		files[fmt.Sprintf("%simgs/class%d/img%03d.jpg", prefix, i%3, i)] = randData(uint64(100+i), 1000+i*4099)
	}
	return files
}

func TestMountReadsTree(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		files := dataset("data/", 100<<20)
		files["outside.txt"] = []byte("not under the mounted prefix")
		put(t, srv.writer(t, bucket), files)
		m := startMount(t, srv, srv.source(bucket, "data"), "", "--read-only")

		// Listings.
		if got := fmt.Sprint(listNames(t, filepath.Join(m.dir, ""))); got != "[big/ d1/ empty imgs/ top.txt]" {
			t.Errorf("root listing %s", got)
		}
		if got := fmt.Sprint(listNames(t, filepath.Join(m.dir, "d1"))); got != "[d2/ empty2 spaced name.txt ünïcødé.bin]" {
			t.Errorf("d1 listing %s", got)
		}
		// Stat sizes.
		for k, v := range files {
			rel, ok := cutPrefix(k, "data/")
			if !ok {
				continue
			}
			st, err := os.Stat(filepath.Join(m.dir, rel))
			if err != nil || st.Size() != int64(len(v)) || st.Mode().Perm() != 0o644 {
				t.Errorf("stat %s: %v size=%d mode=%v (want %d)", rel, err, sizeOf(st), modeOf(st), len(v))
			}
		}
		if _, err := os.Stat(filepath.Join(m.dir, "nope")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("missing file: %v", err)
		}
		// Every byte, then again concurrently (cached now).
		want := expect(files, "data/")
		if d := diffTrees(want, tree(t, m.dir)); d != "" {
			t.Fatalf("tree differs from the bucket:\n%s", d)
		}
		concurrentReaders(t, m.dir, want, 8)
		// The mount was asked to be read-only.
		if err := os.WriteFile(filepath.Join(m.dir, "new"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
			t.Errorf("write on a read-only mount: %v", err)
		}
	})
}

// concurrentReaders has n goroutines read every file in a different order
// and checks each.
func concurrentReaders(t *testing.T, dir string, want map[string]string, n int) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := append([]string(nil), keys...)
			rand.New(rand.NewPCG(uint64(g), 1)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, k := range order {
				h, _, err := fileSHA(filepath.Join(dir, k))
				if err != nil || h != want[k] {
					t.Errorf("reader %d: %s: %v (sha ok=%v)", g, k, err, h == want[k])
				}
			}
		}()
	}
	wg.Wait()
}

func TestRemountServedFromCacheWithServerStopped(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		files := dataset("", 8<<20)
		put(t, srv.writer(t, bucket), files)
		cacheDir := t.TempDir()
		m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--metadata-ttl", "indefinite")
		want := expect(files, "")
		if d := diffTrees(want, tree(t, m.dir)); d != "" {
			t.Fatalf("first read:\n%s", d)
		}
		m.unmount()
		srv.stop(t)

		m = startMount(t, srv, srv.source(bucket, ""), cacheDir, "--metadata-ttl", "indefinite")
		if d := diffTrees(want, tree(t, m.dir)); d != "" {
			t.Fatalf("remount with the server stopped:\n%s", d)
		}
		if s, _ := readSession(cacheDir); s.FetchedBytes != 0 {
			t.Fatalf("remount fetched %d bytes", s.FetchedBytes)
		}
	})
}

func TestChangedObjectSeenAfterTTL(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		put(t, w, map[string][]byte{"f.txt": []byte("version one")})
		m := startMount(t, srv, srv.source(bucket, ""), "", "--metadata-ttl", "1s")
		p := filepath.Join(m.dir, "f.txt")
		f, err := os.Open(p) // held open across the change: keeps reading v1
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if b, _ := os.ReadFile(p); string(b) != "version one" {
			t.Fatalf("v1: %q", b)
		}
		put(t, w, map[string][]byte{"f.txt": []byte("version two, longer")})
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(p)
			if err == nil && string(b) == "version two, longer" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("change not seen after the TTL: %q %v", b, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		buf := make([]byte, 64)
		n, _ := f.ReadAt(buf, 0)
		if string(buf[:n]) != "version one" {
			t.Fatalf("handle opened on v1 now reads %q", buf[:n])
		}
	})
}

func TestEvictionKeepsCacheUnderLimit(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		files := map[string][]byte{}
		for i := range 12 {
			files[fmt.Sprintf("f%02d", i)] = randData(uint64(i), 4<<20)
		}
		put(t, srv.writer(t, bucket), files)
		cacheDir := t.TempDir()
		m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--cache-size", "16MiB")
		want := expect(files, "")
		for round := range 2 {
			if d := diffTrees(want, tree(t, m.dir)); d != "" {
				t.Fatalf("round %d:\n%s", round, d)
			}
		}
		time.Sleep(2500 * time.Millisecond) // the session file refreshes every 2 s
		s, _ := readSession(cacheDir)
		if s.UsedBytes > 16<<20 {
			t.Fatalf("cache holds %d bytes, limit %d", s.UsedBytes, 16<<20)
		}
		if s.UsedBytes == 0 {
			t.Fatal("cache holds nothing")
		}
	})
}

func TestBackendDownDuringReads(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		files := map[string][]byte{"cached.bin": randData(1, 3<<20), "uncached.bin": randData(2, 3<<20)}
		put(t, srv.writer(t, bucket), files)
		m := startMount(t, srv, srv.source(bucket, ""), "", "--metadata-ttl", "indefinite")
		if b, err := os.ReadFile(filepath.Join(m.dir, "cached.bin")); err != nil || !bytes.Equal(b, files["cached.bin"]) {
			t.Fatalf("cached.bin: %v", err)
		}
		if _, err := os.Stat(filepath.Join(m.dir, "uncached.bin")); err != nil {
			t.Fatal(err)
		}
		srv.stop(t)
		start := time.Now() // the server process is gone
		_, err := os.ReadFile(filepath.Join(m.dir, "uncached.bin"))
		took := time.Since(start)
		if !errors.Is(err, syscall.EIO) || took > eioBound {
			t.Fatalf("uncached read with the backend down: %v after %v (want EIO within %v, as README says)", err, took, eioBound)
		}
		t.Logf("EIO after %v", took.Round(time.Millisecond))
		if b, err := os.ReadFile(filepath.Join(m.dir, "cached.bin")); err != nil || !bytes.Equal(b, files["cached.bin"]) {
			t.Fatalf("cached.bin with the backend down: %v", err)
		}
		srv.restart(t)
		// Fetches fail fast for a moment after an outage (one probe at a
		// time finds the backend back); within seconds reads work again.
		deadline := time.Now().Add(15 * time.Second)
		for {
			b, err := os.ReadFile(filepath.Join(m.dir, "uncached.bin"))
			if err == nil && bytes.Equal(b, files["uncached.bin"]) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("uncached.bin 15s after the backend came back: %v", err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

func modeOf(st os.FileInfo) os.FileMode {
	if st == nil {
		return 0
	}
	return st.Mode()
}
