package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stratafs/strata/internal/testserver"
)

// Operations end to end on MinIO: strata warm (offline and through a
// mount's control socket), metrics, cache stats|verify|gc|clear, the
// mount.strata helper under mount(8), config files, signals, and a scan
// of everything strata writes for the credentials it was given.

// opsSetup starts MinIO with a bucket holding opsDataset (a FUSE test).
func opsSetup(t *testing.T) (server, string, map[string][]byte) {
	t.Helper()
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := opsDataset()
	put(t, srv.writer(t, bucket), files)
	return srv, bucket, files
}

// opsDataset is small enough to warm in seconds, with a multi-block file.
func opsDataset() map[string][]byte {
	files := map[string][]byte{
		"data/top.txt":         []byte("hello ops\n"),
		"data/big/shard-0.bin": randData(1, 12<<20+7),
		"data/big/shard-1.bin": randData(2, 3<<20),
	}
	for i := range 24 {
		files[fmt.Sprintf("data/train/c%d/img%02d.jpg", i%3, i)] = randData(uint64(50+i), 2000+i*3001)
	}
	return files
}

// runStrata runs the strata binary with the server's environment and
// returns stdout and stderr.
func runStrata(t *testing.T, srv server, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(testserver.Binary(t, "strata"), args...)
	cmd.Env = append(os.Environ(), srv.env()...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// scrape fetches and parses a mount's /metrics as Prometheus would.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the metrics of %s: %v", addr, err)
	}
	return fams
}

// metric sums the samples of a family whose labels include want (the
// sample count for histograms).
func metric(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
next:
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func metricsAddr(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
}

// TestOpsWarmThenReadWithServerStopped: an offline warm fills the cache,
// then a mount serves every byte with the server down and no GET at all.
func TestOpsWarmThenReadWithServerStopped(t *testing.T) {
	srv, bucket, files := opsSetup(t)
	cacheDir := t.TempDir()
	source := srv.source(bucket, "data")

	args := append([]string{"warm", source, "--cache-dir", cacheDir, "--progress-interval", "1ms"}, srv.flags()...)
	out, errOut, err := runStrata(t, srv, args...)
	if err != nil {
		t.Fatalf("strata warm: %v\n%s%s", err, out, errOut)
	}
	n := len(expect(files, "data/"))
	if !strings.Contains(out, fmt.Sprintf("warmed %d of %d objects", n, n)) {
		t.Errorf("warm summary: %q", out)
	}
	if !strings.Contains(errOut, "warm: 100%") || !strings.Contains(errOut, "objects") || strings.Contains(errOut, "\r") {
		t.Errorf("no plain progress lines off a terminal:\n%s", errOut)
	}
	// Resumable: a second run fetches nothing.
	out, _, err = runStrata(t, srv, args...)
	if err != nil || !strings.Contains(out, "fetched 0B") {
		t.Errorf("second warm: %v %q", err, out)
	}
	// A source under which nothing lies is an error that says so, and
	// names the file when the source is one (before: "warmed 0 of 0
	// objects", exit 0).
	for _, c := range []struct{ source, want string }{
		{srv.source(bucket, "dta"), "nothing to warm: "},
		{srv.source(bucket, "data/big/shard-0.bin"), "big/shard-0.bin is an object (a file, not a directory)"},
	} {
		out, errOut, err := runStrata(t, srv, append([]string{"warm", c.source, "--cache-dir", t.TempDir()}, srv.flags()...)...)
		if err == nil || !strings.Contains(errOut, c.want) {
			t.Errorf("warm %s: %v %q %q, want an error saying %q", c.source, err, out, errOut, c.want)
		}
	}

	srv.stop(t)
	addr := metricsAddr(t)
	m := startMount(t, srv, source, cacheDir, "--metadata-ttl", "indefinite", "--metrics-addr", addr)
	if d := diffTrees(expect(files, "data/"), tree(t, m.dir)); d != "" {
		t.Fatalf("tree read with the server stopped differs:\n%s", d)
	}
	fams := scrape(t, addr)
	if gets := metric(fams, "strata_prefetch_fetches_total", nil); gets != 0 {
		t.Errorf("%v GETs after a warm; want 0", gets)
	}
	if reqs := metric(fams, "strata_backend_requests_total", map[string]string{"op": "read"}); reqs != 0 {
		t.Errorf("%v backend reads after a warm; want 0", reqs)
	}
}

// TestOpsThroughMount: with the cache dir mounted, warm, stats, verify
// and gc go through the mount's control socket, clear refuses, and what
// was warmed is read back without a GET.
func TestOpsThroughMount(t *testing.T) {
	srv, bucket, files := opsSetup(t)
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, "data"), "", "--metrics-addr", addr, "--passthrough", "off")
	gets := func() float64 { return metric(scrape(t, addr), "strata_prefetch_fetches_total", nil) }

	// A cold read: misses, GETs, backend reads, FUSE ops.
	cold := filepath.Join(m.dir, "big", "shard-0.bin")
	if b, err := os.ReadFile(cold); err != nil || sha(b) != sha(files["data/big/shard-0.bin"]) {
		t.Fatalf("cold read: %v", err)
	}
	before := scrape(t, addr)
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"strata_cache_misses_total", nil},
		{"strata_cache_miss_bytes_total", nil},
		{"strata_backend_requests_total", map[string]string{"op": "read", "status": "ok"}},
		{"strata_backend_request_duration_seconds", map[string]string{"op": "read"}},
		{"strata_backend_bytes_total", map[string]string{"op": "read", "direction": "received"}},
		{"strata_fuse_ops_total", map[string]string{"op": "lookup", "result": "ok"}},
		{"strata_fuse_ops_total", map[string]string{"op": "read", "result": "ok"}},
		{"strata_fuse_op_duration_seconds", map[string]string{"op": "open"}},
		{"strata_memory_limit_bytes", nil},
		{"strata_cache_used_bytes", nil},
	} {
		if v := metric(before, c.name, c.labels); v <= 0 {
			t.Errorf("%s%v = %v after a cold read; want > 0", c.name, c.labels, v)
		}
	}
	if v := metric(before, "strata_backend_bytes_total", map[string]string{"op": "read"}); v < float64(len(files["data/big/shard-0.bin"])) {
		t.Errorf("backend received %v bytes, less than the file read", v)
	}

	out, errOut, err := runStrata(t, srv, append([]string{"warm", srv.source(bucket, "data/train"), "--cache-dir", m.cacheDir}, srv.flags()...)...)
	if err != nil || !strings.Contains(errOut, "through its control socket") || !strings.Contains(out, "by the mount on "+m.dir) {
		t.Fatalf("warm through the mount: %v\n%s%s", err, out, errOut)
	}
	warm := scrape(t, addr)
	if v := metric(warm, "strata_prefetch_fetched_bytes_total", map[string]string{"priority": "background"}); v <= 0 {
		t.Errorf("warm fetched %v bytes at background priority", v)
	}
	out, _, err = runStrata(t, srv, "warm", srv.source(bucket, "other"), "--cache-dir", m.cacheDir)
	if err == nil {
		t.Errorf("warm of a source the mount does not serve succeeded: %s", out)
	}

	stats, _, err := runStrata(t, srv, "cache", "stats", "--cache-dir", m.cacheDir)
	if err != nil || !strings.Contains(stats, "live counts") || !strings.Contains(stats, "objects:") {
		t.Errorf("cache stats while mounted: %v\n%s", err, stats)
	}
	// The same by mountpoint: a user knows where the mount is, not
	// always where its cache is.
	byMount, errOut, err := runStrata(t, srv, "cache", "stats", m.dir)
	if err != nil || !strings.Contains(byMount, "cache dir:   "+m.cacheDir) || !strings.Contains(byMount, "live counts") {
		t.Errorf("cache stats %s: %v\n%s%s", m.dir, err, byMount, errOut)
	}
	if _, errOut, err := runStrata(t, srv, "cache", "stats", t.TempDir()); err == nil || !strings.Contains(errOut, "is not mounted") {
		t.Errorf("cache stats of a directory that is no mount: %v %q", err, errOut)
	}
	// A path inside the mount where its mountpoint belongs: the error
	// names the mount and what to type instead.
	for _, c := range []struct{ args, want []string }{
		{[]string{"sync", cold}, []string{"strata sync " + m.dir + "`"}},
		{[]string{"refresh", cold}, []string{"strata refresh " + m.dir + " big/shard-0.bin`"}},
		{[]string{"uploads", cold}, []string{"strata uploads " + m.dir + " big/shard-0.bin`"}},
		{[]string{"cache", "stats", cold}, []string{"strata cache stats " + m.dir + "`"}},
		{[]string{"sync", filepath.Join(t.TempDir(), "gone")}, []string{"no such file or directory", "give the mountpoint of a live Strata mount"}},
	} {
		_, errOut, err := runStrata(t, srv, c.args...)
		if err == nil {
			t.Errorf("strata %v succeeded", c.args)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("strata %v: %q, want it to say %q", c.args, errOut, w)
			}
		}
		if c.args[len(c.args)-1] == cold && !strings.Contains(errOut, "is a path inside the Strata mount at "+m.dir) {
			t.Errorf("strata %v: %q, want it to name the mount", c.args, errOut)
		}
	}
	if out, _, err := runStrata(t, srv, "cache", "verify", m.dir); err != nil || !strings.Contains(out, "0 bad blocks") {
		t.Errorf("cache verify by mountpoint: %v %q", err, out)
	}
	if out, _, err := runStrata(t, srv, "cache", "verify", "--cache-dir", m.cacheDir); err != nil || !strings.Contains(out, "0 bad blocks") {
		t.Errorf("cache verify while mounted: %v %q", err, out)
	}
	if out, _, err := runStrata(t, srv, "cache", "gc", "--cache-dir", m.cacheDir); err != nil || !strings.Contains(out, "by the running mount") {
		t.Errorf("cache gc while mounted: %v %q", err, out)
	}
	if _, errOut, err := runStrata(t, srv, "cache", "clear", "--cache-dir", m.cacheDir); err == nil || !strings.Contains(errOut, "in use") {
		t.Errorf("cache clear while mounted: %v %q", err, errOut)
	}

	// What was warmed is served from the cache, the server down.
	srv.stop(t)
	g0 := gets()
	hit0 := metric(scrape(t, addr), "strata_cache_hit_bytes_total", nil)
	want := expect(files, "data/train/")
	if d := diffTrees(want, tree(t, filepath.Join(m.dir, "train"))); d != "" {
		t.Fatalf("warmed files differ:\n%s", d)
	}
	var wantBytes float64
	for k, v := range files {
		if strings.HasPrefix(k, "data/train/") {
			wantBytes += float64(len(v))
		}
	}
	after := scrape(t, addr)
	if g := metric(after, "strata_prefetch_fetches_total", nil) - g0; g != 0 {
		t.Errorf("%v GETs reading warmed files", g)
	}
	if hit := metric(after, "strata_cache_hit_bytes_total", nil) - hit0; hit < wantBytes {
		t.Errorf("hit bytes grew by %v reading %v warmed bytes", hit, wantBytes)
	}
}

// TestOpsFstab mounts an fstab line through mount(8) and the
// mount.fuse.strata helper.
func TestOpsFstab(t *testing.T) {
	requireFUSE(t)
	bin := testserver.Binary(t, "strata")
	if _, err := exec.LookPath("mount"); err != nil {
		testserver.SkipOrFail(t, "no mount(8): %v", err)
	}
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := opsDataset()
	put(t, srv.writer(t, bucket), files)

	// mount(8) looks for helpers in /sbin only.
	helper := "/sbin/mount.fuse.strata"
	if old, err := os.Readlink(helper); err == nil {
		t.Cleanup(func() {
			os.Remove(helper)
			if err := os.Symlink(old, helper); err != nil {
				t.Errorf("restoring %s -> %s: %v", helper, old, err)
			}
		})
		os.Remove(helper)
	} else if _, err := os.Lstat(helper); err == nil {
		testserver.SkipOrFail(t, "%s exists and is not a symlink; not replacing it", helper)
	} else {
		t.Cleanup(func() { os.Remove(helper) })
	}
	if err := os.Symlink(bin, helper); err != nil {
		testserver.SkipOrFail(t, "cannot install %s: %v", helper, err)
	}

	mnt, cacheDir := t.TempDir(), t.TempDir()
	opts := strings.Join([]string{"_netdev", "nofail", "allow_other", "cache_dir=" + cacheDir, "metadata_ttl=indefinite",
		"endpoint_url=" + srv.m.Endpoint, "force_path_style", "region=" + srv.m.Region, "log_level=debug"}, ",")
	fstab := filepath.Join(t.TempDir(), "fstab")
	line := fmt.Sprintf("%s %s fuse.strata %s 0 0\n", srv.source(bucket, "data"), mnt, opts)
	if err := os.WriteFile(fstab, []byte("# test fstab\n"+line), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("mount", "-a", "-T", fstab)
	cmd.Env = append(os.Environ(), srv.env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mount -a -T %s: %v\n%s\n%s", fstab, err, out, logTail(cacheDir))
	}
	m := &mount{t: t, dir: mnt, cacheDir: cacheDir}
	if s, ok := readSession(cacheDir); ok {
		m.pid = s.PID
	}
	t.Cleanup(m.unmount)
	if !isMounted(mnt) {
		t.Fatalf("%s not mounted after mount -a", mnt)
	}
	if d := diffTrees(expect(files, "data/"), tree(t, mnt)); d != "" {
		t.Fatalf("tree through the fstab mount differs:\n%s", d)
	}
	if log := logTail(cacheDir); !strings.Contains(log, `"metadata_ttl":"indefinite"`) || !strings.Contains(log, `"allow_other":true`) {
		t.Errorf("the -o options did not reach the mount:\n%s", log)
	}
}

// TestOpsConfigFile: the file's settings apply, flags win over them, and
// --print-config shows the result with where each value came from.
func TestOpsConfigFile(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"data/a.txt": []byte("config file test\n")})
	cacheDir := t.TempDir()
	fileAddr, flagAddr := metricsAddr(t), metricsAddr(t)
	conf := filepath.Join(t.TempDir(), "strata.yaml")
	yaml := fmt.Sprintf("cache-dir: %s\nmemory-limit: 64MiB\nmetadata-ttl: indefinite\nmetrics-addr: %q\nendpoint-url: %s\nforce-path-style: true\nregion: %s\n",
		cacheDir, fileAddr, srv.m.Endpoint, srv.m.Region)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	source := srv.source(bucket, "data")

	out, errOut, err := runStrata(t, srv, "mount", "--print-config", source, mnt, "--config", conf, "--metrics-addr", flagAddr)
	if err != nil {
		t.Fatalf("--print-config: %v\n%s", err, errOut)
	}
	for _, want := range []string{
		"memory-limit: 64MiB # config file", "metadata-ttl: indefinite # config file",
		fmt.Sprintf("metrics-addr: %q # flag (overrides the config file)", flagAddr),
		fmt.Sprintf("cache-dir: %q # config file", cacheDir), "block-size: 1MiB # default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("print-config lacks %q:\n%s", want, out)
		}
	}
	if isMounted(mnt) {
		t.Fatal("--print-config mounted")
	}

	if out, errOut, err := runStrata(t, srv, "mount", source, mnt, "--config", conf, "--metrics-addr", flagAddr); err != nil {
		t.Fatalf("mount --config: %v\n%s%s", err, out, errOut)
	}
	m := &mount{t: t, dir: mnt, cacheDir: cacheDir}
	if s, ok := readSession(cacheDir); ok {
		m.pid = s.PID
	} else {
		t.Fatalf("no session in the config file's cache dir %s", cacheDir)
	}
	t.Cleanup(m.unmount)
	fams := scrape(t, flagAddr)
	if v := metric(fams, "strata_memory_limit_bytes", nil); v != 64<<20 {
		t.Errorf("memory limit %v, want the file's 64MiB", v)
	}
	if _, err := http.Get("http://" + fileAddr + "/metrics"); err == nil {
		t.Error("the file's metrics address is served although the flag overrides it")
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "a.txt")); err != nil || string(b) != "config file test\n" {
		t.Errorf("read through the configured mount: %q %v", b, err)
	}
	if log := logTail(cacheDir); !strings.Contains(log, `"config_file":"`+conf+`"`) {
		t.Errorf("the mount summary does not name the config file:\n%s", log)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("cache-dir: /x\ncache-sise: 1GiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runStrata(t, srv, "mount", source, t.TempDir(), "--config", bad); err == nil || !strings.Contains(errOut, "bad.yaml:2: unknown key \"cache-sise\"") {
		t.Errorf("bad config file: %v %q", err, errOut)
	}
}

// TestOpsVerifyDropsCorruptBlock: a block flipped on disk is found by
// verify, dropped, and fetched again on the next read.
func TestOpsVerifyDropsCorruptBlock(t *testing.T) {
	srv, bucket, files := opsSetup(t)
	cacheDir := t.TempDir()
	source := srv.source(bucket, "data")
	if out, errOut, err := runStrata(t, srv, append([]string{"warm", source, "--cache-dir", cacheDir}, srv.flags()...)...); err != nil {
		t.Fatalf("warm: %v\n%s%s", err, out, errOut)
	}
	// The biggest cache file is big/shard-0.bin; flip bytes in its block 3.
	var biggest string
	var size int64
	err := filepath.Walk(filepath.Join(cacheDir, "objects"), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() && fi.Size() > size {
			biggest, size = p, fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(biggest, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("bit rot"), 3<<20+12345); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := runStrata(t, srv, "cache", "verify", "--cache-dir", cacheDir)
	if err != nil || !strings.Contains(out, "1 bad blocks dropped in 1 objects") || !strings.Contains(out, "big/shard-0.bin") {
		t.Fatalf("verify: %v\n%s%s", err, out, errOut)
	}
	if out, _, err := runStrata(t, srv, "cache", "verify", "--cache-dir", cacheDir); err != nil || !strings.Contains(out, "0 bad blocks") {
		t.Fatalf("second verify: %v %q", err, out)
	}
	m := startMount(t, srv, source, cacheDir)
	if b, err := os.ReadFile(filepath.Join(m.dir, "big", "shard-0.bin")); err != nil || sha(b) != sha(files["data/big/shard-0.bin"]) {
		t.Fatalf("re-read of the repaired file: %v (sha ok %v)", err, err == nil && sha(b) == sha(files["data/big/shard-0.bin"]))
	}
}

// TestOpsSignals: SIGUSR1 dumps stats to the log, SIGHUP reopens a
// rotated log, SIGTERM during a warm unmounts cleanly with the index
// flushed and the session in the history.
func TestOpsSignals(t *testing.T) {
	srv, bucket, _ := opsSetup(t)
	source := srv.source(bucket, "data")
	m := startMount(t, srv, source, "")
	logPath := filepath.Join(m.cacheDir, "strata.log")

	if err := syscall.Kill(m.pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGUSR1 stats line", func() bool { return strings.Contains(readFile(logPath), `"msg":"stats (SIGUSR1)"`) })
	if !strings.Contains(readFile(logPath), `"strata_cache_used_bytes"`) {
		t.Error("the stats line lacks the metrics")
	}

	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(m.pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new log file", func() bool { return strings.Contains(readFile(logPath), "log file reopened") })
	rotated := readFile(logPath + ".1")

	// SIGTERM while a warm runs through the control socket.
	warm := exec.Command(testserver.Binary(t, "strata"), append([]string{"warm", source, "--cache-dir", m.cacheDir}, srv.flags()...)...)
	warm.Env = append(os.Environ(), srv.env()...)
	var warmOut bytes.Buffer
	warm.Stdout, warm.Stderr = &warmOut, &warmOut
	if err := warm.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warm to reach the mount", func() bool { return strings.Contains(readFile(logPath), "control: warm") })
	if err := syscall.Kill(m.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mount process to exit", func() bool { return syscall.Kill(m.pid, 0) != nil })
	m.pid = 0
	// The warm ends, done or failed, when the mount it runs in exits: what
	// is checked is the mount's clean exit.
	_ = warm.Wait()
	if isMounted(m.dir) {
		t.Fatal("still mounted after SIGTERM")
	}
	if readFile(logPath+".1") != rotated {
		t.Error("the rotated log file was written to after SIGHUP")
	}
	if log := readFile(logPath); !strings.Contains(log, "signal received; unmounting") || !strings.Contains(log, "flushing the cache index") {
		t.Errorf("no clean unmount in the log:\n%s", log)
	}
	var hist []map[string]any
	if b, err := os.ReadFile(filepath.Join(m.cacheDir, "history.json")); err != nil || json.Unmarshal(b, &hist) != nil || len(hist) != 1 {
		t.Errorf("history after the unmount: %v %v", hist, err)
	}
	// The index is consistent: every block it lists verifies.
	if out, _, err := runStrata(t, srv, "cache", "verify", "--cache-dir", m.cacheDir); err != nil || !strings.Contains(out, " 0 bad blocks") {
		t.Errorf("verify after SIGTERM: %v %q", err, out)
	}
	stats, _, err := runStrata(t, srv, "cache", "stats", "--cache-dir", m.cacheDir)
	if err != nil || !strings.Contains(stats, "history:") {
		t.Errorf("cache stats after the unmount: %v\n%s", err, stats)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOpsNoCredentialInOutput scans everything strata writes (debug log,
// command output, session and history files, metrics, print-config, the
// error of a refused mount) for the credentials it was given.
func TestOpsNoCredentialInOutput(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), opsDataset())
	source := srv.source(bucket, "data")
	addr := metricsAddr(t)
	var seen []string
	add := func(what, s string) { seen = append(seen, "--- "+what+"\n"+s) }

	m := startMount(t, srv, source, "", "--metrics-addr", addr)
	tree(t, m.dir)
	out, errOut, err := runStrata(t, srv, append([]string{"warm", source, "--cache-dir", m.cacheDir}, srv.flags()...)...)
	add("warm", out+errOut)
	if err != nil {
		t.Fatalf("warm: %v", err)
	}
	out, errOut, _ = runStrata(t, srv, "cache", "stats", "--cache-dir", m.cacheDir, "--json")
	add("stats", out+errOut)
	out, errOut, _ = runStrata(t, srv, append([]string{"mount", "--print-config", source, m.dir}, srv.flags()...)...)
	add("print-config", out+errOut)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err == nil {
		var b bytes.Buffer
		if _, err := b.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		add("metrics", b.String())
	}
	if err := syscall.Kill(m.pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGUSR1 line", func() bool { return strings.Contains(logTail(m.cacheDir), "SIGUSR1") })
	m.unmount()

	// A mount refused for a wrong secret must not echo it.
	bad := exec.Command(testserver.Binary(t, "strata"), append([]string{"mount", source, t.TempDir(), "--cache-dir", t.TempDir(), "--log-level", "debug"}, srv.flags()...)...)
	bad.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.m.AccessKey, "AWS_SECRET_ACCESS_KEY=wrong-"+srv.m.SecretKey)
	badOut, err := bad.CombinedOutput()
	if err == nil {
		t.Error("a mount with a wrong secret succeeded")
	}
	add("refused mount", string(badOut))
	for _, name := range []string{"strata.log", "session.json", "history.json"} {
		add(name, readFile(filepath.Join(m.cacheDir, name)))
	}

	all := strings.Join(seen, "\n")
	if !strings.Contains(all, "stats (SIGUSR1)") || !strings.Contains(all, "strata_backend_requests_total") {
		t.Fatal("the scan did not see the log and the metrics; it proves nothing")
	}
	for _, secret := range []string{srv.m.SecretKey, "wrong-" + srv.m.SecretKey} {
		if i := strings.Index(all, secret); i >= 0 {
			lo := max(0, i-300)
			t.Errorf("credential %q found in output:\n%s", secret, all[lo:min(len(all), i+100)])
		}
	}
}
