package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// The proof that warm reads never reach the daemon: the mount counts the
// FUSE READ requests it answers (strata_fs_reads_total, "reads" in
// `strata cache stats`), and how it served each open (passthrough or
// userspace). A fully cached file opened through passthrough is read by
// the kernel from the cache file: zero READs. A file that is not fully
// cached, or is being written, is served by the daemon: READs counted.

// proofDataset is an ImageFolder-like set of 128 KiB samples plus files of
// several cache blocks.
func proofDataset() map[string][]byte {
	files := map[string][]byte{
		"data/shards/a.bin": randData(900, 12<<20+7),
		"data/shards/b.bin": randData(901, 3<<20),
	}
	for i := range 32 {
		files[fmt.Sprintf("data/train/c%d/img%02d.jpg", i%4, i)] = randData(uint64(1000+i), 128<<10)
	}
	return files
}

// liveCounters is what `strata cache stats --json` reports of a running
// mount's session.
type liveCounters struct {
	Live    bool `json:"live"`
	Session struct {
		Passthrough  bool  `json:"passthrough"`
		Opens        int64 `json:"opens"`
		PTOpens      int64 `json:"passthrough_opens"`
		USOpens      int64 `json:"userspace_opens"`
		Reads        int64 `json:"reads"`
		ReadBytes    int64 `json:"read_bytes"`
		HitOps       int64 `json:"hit_ops"`
		HitBytes     int64 `json:"hit_bytes"`
		PrefOps      int64 `json:"prefetch_hit_ops"`
		PrefBytes    int64 `json:"prefetch_hit_bytes"`
		Writes       int64 `json:"writes"`
		PTWriteOpens int64 `json:"passthrough_write_opens"`
	} `json:"session"`
}

func cacheStatsLive(t *testing.T, srv server, cacheDir string) liveCounters {
	t.Helper()
	out, errOut, err := runStrata(t, srv, "cache", "stats", "--cache-dir", cacheDir, "--json")
	if err != nil {
		t.Fatalf("strata cache stats: %v\n%s%s", err, out, errOut)
	}
	var c liveCounters
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("strata cache stats --json: %v\n%s", err, out)
	}
	if !c.Live {
		t.Fatalf("strata cache stats of a mounted cache dir is not live:\n%s", out)
	}
	return c
}

// readWhole reads p through one open/read/close, as a DataLoader worker
// does, and checks its bytes.
func readWhole(t *testing.T, p string, want []byte) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read %d bytes that differ from the object's %d", p, len(got), len(want))
	}
}

// waitWritten waits until the mount has written n block bytes into its
// cache: a read returns once its bytes are handed over, a moment before
// the last block lands on disk and the file counts as fully cached.
func waitWritten(t *testing.T, addr string, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		w := metric(scrape(t, addr), "strata_cache_written_bytes_total", nil)
		if w >= float64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache holds %v of the %d bytes read", w, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dropCaches(t *testing.T) {
	t.Helper()
	if err := workload.DropPageCache(); err != nil {
		t.Fatal(err)
	}
}

// warmMount mounts the proof dataset with passthrough required, reads it
// once and waits until every file is fully cached.
func warmMount(t *testing.T, extra ...string) (server, *mount, string, map[string][]byte, []string) {
	t.Helper()
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := proofDataset()
	put(t, srv.writer(t, bucket), files)
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, "data"), "", append([]string{"--metrics-addr", addr, "--passthrough", "on"}, extra...)...)

	// Passthrough is in effect on this kernel and in this mount: the
	// mount proved it by registering a backing file (--passthrough on
	// fails the mount otherwise), and says so.
	if v := metric(scrape(t, addr), "strata_fs_passthrough_enabled", nil); v != 1 {
		t.Fatalf("strata_fs_passthrough_enabled = %v with --passthrough on", v)
	}
	if c := cacheStatsLive(t, srv, m.cacheDir); !c.Session.Passthrough {
		t.Fatal("cache stats: the mount does not report passthrough")
	}

	var keys []string
	var total int64
	for k, v := range files {
		keys = append(keys, k)
		total += int64(len(v))
	}
	slices.Sort(keys)
	for _, k := range keys {
		readWhole(t, filepath.Join(m.dir, k[len("data/"):]), files[k])
	}
	waitWritten(t, addr, total)
	return srv, m, addr, files, keys
}

// TestPassthroughWarmReadsReachNoDaemon: after a warm-up read, with the
// page cache dropped, every file is read again through its own open,
// read and close: each open is a passthrough open and the daemon answers
// no READ at all.
func TestPassthroughWarmReadsReachNoDaemon(t *testing.T) {
	srv, m, addr, files, keys := warmMount(t)
	dropCaches(t)

	before, beforeStats := scrape(t, addr), cacheStatsLive(t, srv, m.cacheDir)
	for _, k := range keys {
		readWhole(t, filepath.Join(m.dir, k[len("data/"):]), files[k])
	}
	after, afterStats := scrape(t, addr), cacheStatsLive(t, srv, m.cacheDir)

	delta := func(name string, labels map[string]string) float64 {
		return metric(after, name, labels) - metric(before, name, labels)
	}
	n := float64(len(keys))
	if d := delta("strata_fs_reads_total", nil); d != 0 {
		t.Errorf("the daemon answered %v READs for %v fully cached files; want 0", d, n)
	}
	if d := delta("strata_fs_read_bytes_total", nil); d != 0 {
		t.Errorf("the daemon returned %v bytes; want 0", d)
	}
	if d := delta("strata_fuse_ops_total", map[string]string{"op": "read"}); d != 0 {
		t.Errorf("strata_fuse_ops_total{op=read} rose by %v; want 0", d)
	}
	if d := delta("strata_fs_passthrough_opens_total", nil); d != n {
		t.Errorf("passthrough opens rose by %v for %v files", d, n)
	}
	if d := delta("strata_fs_userspace_opens_total", nil); d != 0 {
		t.Errorf("userspace opens rose by %v; want 0", d)
	}
	if d := delta("strata_prefetch_fetches_total", nil); d != 0 {
		t.Errorf("%v GETs reading fully cached files", d)
	}

	// The same counters through the control socket.
	b, a := beforeStats.Session, afterStats.Session
	if a.Reads != b.Reads || a.ReadBytes != b.ReadBytes {
		t.Errorf("cache stats: reads %d -> %d (%d -> %d bytes); want unchanged", b.Reads, a.Reads, b.ReadBytes, a.ReadBytes)
	}
	if a.PTOpens-b.PTOpens != int64(len(keys)) || a.USOpens != b.USOpens {
		t.Errorf("cache stats: passthrough opens +%d, userspace opens +%d for %d files", a.PTOpens-b.PTOpens, a.USOpens-b.USOpens, len(keys))
	}
	out, _, err := runStrata(t, srv, "cache", "stats", "--cache-dir", m.cacheDir)
	if err != nil || !bytes.Contains([]byte(out), []byte("FUSE READs answered by strata")) || !bytes.Contains([]byte(out), []byte("passthrough, ")) {
		t.Errorf("cache stats text lacks the opens and reads lines: %v\n%s", err, out)
	}
}

// TestUserspaceReadsAreCounted: files the kernel cannot be handed, one not
// fully cached and one open for writing, are served by the daemon,
// correctly, and their READs are counted.
func TestUserspaceReadsAreCounted(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := proofDataset()
	put(t, srv.writer(t, bucket), files)
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, "data"), "", "--metrics-addr", addr, "--passthrough", "on")

	counts := func() (reads, bytes, pt, us float64) {
		f := scrape(t, addr)
		return metric(f, "strata_fs_reads_total", nil), metric(f, "strata_fs_read_bytes_total", nil),
			metric(f, "strata_fs_passthrough_opens_total", nil), metric(f, "strata_fs_userspace_opens_total", nil)
	}

	t.Run("not cached", func(t *testing.T) {
		r0, b0, pt0, us0 := counts()
		const k = "data/shards/a.bin"
		readWhole(t, filepath.Join(m.dir, "shards/a.bin"), files[k])
		r1, b1, pt1, us1 := counts()
		if r1-r0 <= 0 || b1-b0 < float64(len(files[k])) {
			t.Errorf("a cold read: %v READs, %v bytes answered; want > 0 and at least %d", r1-r0, b1-b0, len(files[k]))
		}
		if pt1 != pt0 || us1-us0 != 1 {
			t.Errorf("a cold open: passthrough +%v, userspace +%v; want +0 and +1", pt1-pt0, us1-us0)
		}
	})

	t.Run("being written", func(t *testing.T) {
		p := filepath.Join(m.dir, "out", "ckpt.bin")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		data := randData(77, 3<<20+11)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		r0, b0, pt0, us0 := counts()
		dropCaches(t) // the bytes must come from the daemon, not the page cache the write filled
		readWhole(t, p, data)
		r1, b1, pt1, us1 := counts()
		if r1-r0 <= 0 || b1-b0 < float64(len(data)) {
			t.Errorf("reading a file open for writing: %v READs, %v bytes answered; want > 0 and at least %d", r1-r0, b1-b0, len(data))
		}
		if pt1 != pt0 || us1-us0 != 1 {
			t.Errorf("opening a file open for writing: passthrough +%v, userspace +%v; want +0 and +1", pt1-pt0, us1-us0)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	})
}

// TestHitsCountPassthroughOpens: the hit ratio means what an operator
// thinks. A cold epoch, served by demand fetches, readahead and directory
// prefetch, counts no cache hit; a warm epoch served entirely through
// passthrough counts one hit per file, with the files' bytes, and nothing
// else.
func TestHitsCountPassthroughOpens(t *testing.T) {
	srv, m, addr, files, keys := warmMount(t)
	var total float64
	for _, v := range files {
		total += float64(len(v))
	}

	cold := scrape(t, addr)
	ahead := metric(cold, "strata_prefetch_fetched_bytes_total", map[string]string{"priority": "readahead"}) +
		metric(cold, "strata_prefetch_fetched_bytes_total", map[string]string{"priority": "background"})
	if ahead == 0 {
		t.Fatal("the cold epoch prefetched nothing: the test proves nothing about prefetch")
	}
	if h, hb := metric(cold, "strata_cache_hits_total", nil), metric(cold, "strata_cache_hit_bytes_total", nil); h != 0 || hb != 0 {
		t.Errorf("a cold epoch (%v bytes prefetched) counted %v cache hits of %v bytes; want 0", ahead, h, hb)
	}
	served := metric(cold, "strata_cache_prefetch_hit_bytes_total", nil) + metric(cold, "strata_cache_miss_bytes_total", nil)
	if served < total {
		t.Errorf("a cold epoch of %v bytes: %v bytes counted as prefetch hits or misses", total, served)
	}

	dropCaches(t)
	beforeStats := cacheStatsLive(t, srv, m.cacheDir)
	for _, k := range keys {
		readWhole(t, filepath.Join(m.dir, k[len("data/"):]), files[k])
	}
	warm := scrape(t, addr)
	afterStats := cacheStatsLive(t, srv, m.cacheDir)
	delta := func(name string) float64 { return metric(warm, name, nil) - metric(cold, name, nil) }
	n := float64(len(keys))
	if d := delta("strata_fs_passthrough_opens_total"); d != n {
		t.Fatalf("warm epoch: %v passthrough opens for %v files", d, n)
	}
	if d := delta("strata_cache_hits_total"); d != n {
		t.Errorf("warm epoch through passthrough: hits rose by %v for %v files", d, n)
	}
	if d := delta("strata_cache_hit_bytes_total"); d != total {
		t.Errorf("warm epoch: hit bytes rose by %v; want %v", d, total)
	}
	for _, name := range []string{"strata_cache_prefetch_hits_total", "strata_cache_prefetch_hit_bytes_total", "strata_cache_misses_total", "strata_cache_miss_bytes_total"} {
		if d := delta(name); d != 0 {
			t.Errorf("warm epoch: %s rose by %v; want 0", name, d)
		}
	}
	b, a := beforeStats.Session, afterStats.Session
	if a.HitOps-b.HitOps != int64(len(keys)) || a.HitBytes-b.HitBytes != int64(total) || a.PrefOps != b.PrefOps {
		t.Errorf("cache stats: hit_ops +%d, hit_bytes +%d, prefetch_hit_ops +%d; want +%d, +%v, +0",
			a.HitOps-b.HitOps, a.HitBytes-b.HitBytes, a.PrefOps-b.PrefOps, len(keys), total)
	}
	out, _, err := runStrata(t, srv, "cache", "stats", "--cache-dir", m.cacheDir)
	if err != nil || !bytes.Contains([]byte(out), []byte("prefetched")) {
		t.Errorf("cache stats text lacks the prefetched bytes: %v\n%s", err, out)
	}
}

// TestWrittenFilesReadBackThroughPassthrough: a file written through the
// mount becomes the cached copy of the object it uploaded, so once its
// upload is complete it is read back by the kernel from the cache file
// (torch.load after torch.save): a passthrough open and no READ for the
// daemon, for a small file and for one larger than --verify-on-open's
// bound (its blocks were checksummed from the bytes written, this run).
func TestWrittenFilesReadBackThroughPassthrough(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr, "--passthrough", "on")
	files := map[string][]byte{"small.pt": randData(70, 3<<20+5), "model.pt": randData(71, 80<<20)}
	for name, data := range files {
		if _, err := writeFile(filepath.Join(m.dir, name), data); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("strata sync: %v\n%s", err, out)
	}
	// Read back at once (the kernel still knows the written inodes), then
	// again with the page cache and the dentries dropped (new lookups).
	for _, drop := range []bool{false, true} {
		if drop {
			dropCaches(t)
		}
		before := cacheStatsLive(t, srv, m.cacheDir)
		for name, data := range files {
			readWhole(t, filepath.Join(m.dir, name), data)
		}
		after := cacheStatsLive(t, srv, m.cacheDir)
		if pt, us, reads := after.Session.PTOpens-before.Session.PTOpens, after.Session.USOpens-before.Session.USOpens,
			after.Session.Reads-before.Session.Reads; pt != 2 || us != 0 || reads != 0 {
			t.Fatalf("reading back 2 files written through the mount (caches dropped: %v): %d passthrough opens, %d userspace opens, %d READs for the daemon (want 2, 0, 0)", drop, pt, us, reads)
		}
	}
}

// TestReadRightAfterCloseIsPassthrough: torch.load right after
// torch.save. With --upload sync (the default) close returns once the
// object is in the bucket, and an open that follows at once is served as
// the cached copy, by passthrough, not from the staged file through the
// daemon while the writeback layer moves it into the cache. With
// --upload async the upload is still pending: the kernel reads the
// committed staging file by passthrough, and a reader that keeps it open
// while the upload lands reads on, unchanged; the writer wrote it by
// passthrough too (ptwrite_test.go).
func TestReadRightAfterCloseIsPassthrough(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			addr := metricsAddr(t)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr, "--passthrough", "on", "--upload", mode)
			for i, size := range []int{3<<20 + 5, 96 << 20, 160<<20 + 1} {
				name := fmt.Sprintf("ckpt-%d.pt", i)
				data := randData(uint64(80+i), size)
				// Counted before the write: nothing may come between the
				// close and the open.
				before := cacheStatsLive(t, srv, m.cacheDir)
				if _, err := writeFile(filepath.Join(m.dir, name), data); err != nil {
					t.Fatal(err)
				}
				f, err := os.Open(filepath.Join(m.dir, name))
				if err != nil {
					t.Fatal(err)
				}
				half := make([]byte, size/2)
				if _, err := io.ReadFull(f, half); err != nil {
					t.Fatal(err)
				}
				if mode == "async" {
					// The upload lands and the staged file becomes the
					// cached copy while the reader holds it open.
					if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
						t.Fatalf("strata sync: %v\n%s", err, out)
					}
				}
				rest, err := io.ReadAll(f)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(append(half, rest...), data) {
					t.Fatalf("%s read back differs from what was written", name)
				}
				after := cacheStatsLive(t, srv, m.cacheDir)
				// The writer: through the daemon in sync mode, by
				// passthrough (no WRITE answered) in async mode.
				wantPT, wantUS, wantWrites := 1, 1, int64(1)
				if mode == "async" {
					wantPT, wantUS, wantWrites = 2, 0, 0
				}
				writes := after.Session.Writes - before.Session.Writes
				if pt, us, reads := after.Session.PTOpens-before.Session.PTOpens, after.Session.USOpens-before.Session.USOpens,
					after.Session.Reads-before.Session.Reads; pt != int64(wantPT) || us != int64(wantUS) || reads != 0 || min(writes, 1) != wantWrites {
					t.Errorf("writing %s (%d bytes) and reading it back right after its close: %d passthrough opens, %d userspace opens, %d READs, %d WRITEs for the daemon (want %d, %d, 0, %s)",
						name, size, pt, us, reads, writes, wantPT, wantUS, map[int64]string{0: "0", 1: "some"}[wantWrites])
				}
			}
			// Once uploaded, the files are read back as cached objects.
			if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
				t.Fatalf("strata sync: %v\n%s", err, out)
			}
			dropCaches(t)
			before := cacheStatsLive(t, srv, m.cacheDir)
			for i, size := range []int{3<<20 + 5, 96 << 20, 160<<20 + 1} {
				readWhole(t, filepath.Join(m.dir, fmt.Sprintf("ckpt-%d.pt", i)), randData(uint64(80+i), size))
			}
			after := cacheStatsLive(t, srv, m.cacheDir)
			if pt, reads := after.Session.PTOpens-before.Session.PTOpens, after.Session.Reads-before.Session.Reads; pt != 3 || reads != 0 {
				t.Errorf("reading back 3 uploaded files: %d passthrough opens, %d READs (want 3, 0)", pt, reads)
			}
		})
	}
}
