package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// Crashes: the mount killed with SIGKILL at random points while readers
// fill (and evict from) the cache must leave a cache in which no block
// disagrees with its CRC, and every file reads back right after a
// restart. Bytes flipped in cache files are caught and refetched.

// verifyReport is `strata cache verify --json`.
type verifyReport struct {
	Objects   int64 `json:"objects"`
	Bytes     int64 `json:"bytes"`
	BadBlocks int64 `json:"bad_blocks"`
	Live      bool  `json:"live"`
}

// verifyCache runs `strata cache verify` on an unmounted cache dir.
func verifyCache(t *testing.T, cacheDir string) verifyReport {
	t.Helper()
	out, err := exec.Command(testserver.Binary(t, "strata"), "cache", "verify", "--cache-dir", cacheDir, "--json").Output()
	var r verifyReport
	if err != nil || json.Unmarshal(out, &r) != nil {
		t.Fatalf("strata cache verify: %v\n%s", err, out)
	}
	if r.Live {
		t.Fatalf("cache verify ran through a live mount; want the offline check of every block")
	}
	return r
}

// waitBlocksRecorded waits until the index of the live mount on cacheDir
// holds want blocks (strata cache stats).
func waitBlocksRecorded(t *testing.T, cacheDir string, want int64) {
	t.Helper()
	var st struct {
		Blocks int64 `json:"blocks"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, err := exec.Command(binPath(t), "cache", "stats", "--cache-dir", cacheDir, "--json").Output()
		if err == nil && json.Unmarshal(out, &st) == nil && st.Blocks == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache index holds %d blocks 30 s after the reads, want %d (%v)", st.Blocks, want, err)
		}
	}
}

// corruptBlocks is the count a mount reported in session.json at exit.
func corruptBlocks(t *testing.T, cacheDir string) int64 {
	t.Helper()
	var s struct {
		Corrupt int64 `json:"corrupt_blocks"`
		Running bool  `json:"running"`
	}
	b, err := os.ReadFile(filepath.Join(cacheDir, "session.json"))
	if err != nil || json.Unmarshal(b, &s) != nil || s.Running {
		t.Fatalf("session.json after unmount: %v %s", err, b)
	}
	return s.Corrupt
}

// kill9 kills the mount like the OOM killer would and detaches the dead
// mountpoint the way a user must (umount -l).
func (m *mount) kill9() {
	m.t.Helper()
	if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil {
		m.t.Fatalf("kill -9 %d: %v", m.pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.pid))
		if err != nil || strings.Contains(string(st), ") Z ") {
			break // gone, or a zombie nobody reaps yet
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("strata (pid %d) alive 30s after SIGKILL", m.pid)
		}
	}
	m.pid = 0
	if out, err := exec.Command("umount", "-l", m.dir).CombinedOutput(); err != nil {
		m.t.Fatalf("umount -l %s: %v %s", m.dir, err, out)
	}
}

// crashTree is 64 files: small, medium and large, 90 MiB in all.
func crashTree() map[string][]byte {
	files := map[string][]byte{}
	for i := range 64 {
		n := 1 + (i*7919)%(96<<10)
		switch {
		case i%8 == 0:
			n = 6<<20 + i*4099
		case i%3 == 0:
			n = 1<<20 + i*12289
		}
		files[fmt.Sprintf("d%d/f%02d", i%4, i)] = randData(uint64(900+i), n)
	}
	return files
}

// TestCrashLoop kills the mount 20 times at random points while 8 readers
// fill a cache smaller than the data (so eviction runs too), then checks
// every block with `strata cache verify` and every file after a restart.
func TestCrashLoop(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := crashTree()
	putParallel(t, srv.writer(t, bucket), files)
	want := expect(files, "")
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	cacheDir := t.TempDir()
	flags := []string{"--cache-size", "48MiB", "--metadata-ttl", "indefinite"}
	rng := rand.New(rand.NewPCG(20, 9))
	var killedReads, verified, totalBad int64
	const rounds = 20
	for round := range rounds {
		m := startMount(t, srv, srv.source(bucket, ""), cacheDir, flags...)
		var wg sync.WaitGroup
		var reads, wrong atomic.Int64
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				for {
					k := keys[r.IntN(len(keys))]
					b, err := os.ReadFile(filepath.Join(m.dir, k))
					if err != nil {
						return // the mount is gone
					}
					reads.Add(1)
					if sha(b) != want[k] {
						wrong.Add(1)
					}
				}
			}()
		}
		time.Sleep(time.Duration(50+rng.IntN(2500)) * time.Millisecond)
		m.kill9()
		wg.Wait()
		killedReads += reads.Load()
		if wrong.Load() > 0 {
			t.Fatalf("round %d: %d reads returned wrong bytes before the kill", round, wrong.Load())
		}

		v := verifyCache(t, cacheDir)
		verified += v.Bytes
		totalBad += v.BadBlocks
		if v.BadBlocks != 0 {
			t.Errorf("round %d: verify found %d blocks whose bytes disagree with their CRC", round, v.BadBlocks)
		}
		m = startMount(t, srv, srv.source(bucket, ""), cacheDir, flags...)
		if d := diffTrees(want, tree(t, m.dir)); d != "" {
			t.Fatalf("round %d: after the restart:\n%s", round, d)
		}
		m.unmount()
		if n := corruptBlocks(t, cacheDir); n != 0 {
			t.Errorf("round %d: the restarted mount dropped %d blocks failing their CRC", round, n)
		}
	}
	t.Logf("%d kills survived; %d complete reads before the kills; verify checked %d MiB, %d bad blocks",
		rounds, killedReads, verified>>20, totalBad)
}

// cacheFiles lists the cache files of a cache dir (objects/ab/cd/<id>).
func cacheFiles(t *testing.T, cacheDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(cacheDir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// TestFlippedCacheBytes: the mount is killed (kill -9) and one byte of
// every cache file flipped before the next mount, as a crash tears
// blocks. The next mount does not trust what it finds (no clean shutdown
// was recorded): every file still reads back right, each flipped block is
// caught by its CRC (by the read, or the background verification the
// mount runs after a crash), and the cache verifies clean afterwards. One
// file is bigger than the size verified at open, so its blocks are
// checked as userspace reads them.
func TestFlippedCacheBytes(t *testing.T) {
	requireFUSE(t)
	// With passthrough off, reads of ranges verified in this run are
	// spliced from the cache file, unverified ones read and checked.
	for _, pt := range []string{"auto", "off"} {
		t.Run("passthrough="+pt, func(t *testing.T) { flippedCacheBytes(t, pt) })
	}
}

func flippedCacheBytes(t *testing.T, passthrough string) {
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := map[string][]byte{"big.bin": randData(1, 66<<20+5)}
	for i := range 12 {
		files[fmt.Sprintf("f%02d", i)] = randData(uint64(10+i), 1+i*150001)
	}
	put(t, srv.writer(t, bucket), files)
	want := expect(files, "")
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--metadata-ttl", "indefinite", "--passthrough", passthrough)
	if d := diffTrees(want, tree(t, m.dir)); d != "" {
		t.Fatalf("first read:\n%s", d)
	}
	// A read can be answered from a fetch whose cache write is still
	// being recorded; a block whose bytes reached the cache file but not
	// the index when the mount died is absent to the next mount and
	// fetched again, so a flip in it is no test of the CRC. Kill the mount
	// once the index holds every block (1 MiB each, the default).
	var blocks int64
	for _, b := range files {
		blocks += (int64(len(b)) + 1<<20 - 1) >> 20
	}
	waitBlocksRecorded(t, cacheDir, blocks)
	m.kill9()

	rng := rand.New(rand.NewPCG(3, 4))
	flipped := 0
	for _, p := range cacheFiles(t, cacheDir) {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		if st.Size() > 0 {
			off := rng.Int64N(st.Size())
			b := []byte{0}
			if _, err := f.ReadAt(b, off); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 1 << rng.IntN(8)
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			flipped++
		}
		f.Close()
	}
	if flipped != len(files) {
		t.Fatalf("flipped %d cache files, want %d (one per file)", flipped, len(files))
	}
	m = startMount(t, srv, srv.source(bucket, ""), cacheDir, "--metadata-ttl", "indefinite", "--passthrough", passthrough)
	if d := diffTrees(want, tree(t, m.dir)); d != "" {
		t.Fatalf("read after flipping cache bytes:\n%s", d)
	}
	m.unmount()
	if n := corruptBlocks(t, cacheDir); n != int64(flipped) {
		t.Errorf("%d blocks failed their CRC, want %d", n, flipped)
	}
	if v := verifyCache(t, cacheDir); v.BadBlocks != 0 || v.Bytes == 0 {
		t.Errorf("verify after the refetch: %+v", v)
	}
}
