package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// fatal carries a setup failure out of testserver (which reports through
// testing.TB) as an error.
type fatal error

// env lets testserver start MinIO outside a test: the testing.TB methods
// it calls are implemented; anything else would panic on the nil TB.
type env struct {
	testing.TB
	root     string
	mu       sync.Mutex
	cleanups []func()
	n        int
}

func newEnv() *env { return &env{root: tempRoot()} }

func (e *env) Helper()                 {}
func (e *env) Logf(f string, a ...any) { fmt.Printf("soak: "+f+"\n", a...) }
func (e *env) Errorf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "soak: "+f+"\n", a...)
}
func (e *env) Fatal(a ...any)            { panic(fatal(errors.New(fmt.Sprint(a...)))) }
func (e *env) Fatalf(f string, a ...any) { panic(fatal(fmt.Errorf(f, a...))) }
func (e *env) Skipf(f string, a ...any)  { e.Fatalf(f, a...) }
func (e *env) Cleanup(f func()) {
	e.mu.Lock()
	e.cleanups = append(e.cleanups, f)
	e.mu.Unlock()
}

func (e *env) TempDir() string {
	e.mu.Lock()
	e.n++
	d := filepath.Join(e.root, fmt.Sprintf("tmp%d", e.n))
	e.mu.Unlock()
	if err := os.MkdirAll(d, 0o700); err != nil {
		e.Fatal(err)
	}
	return d
}

func (e *env) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	os.RemoveAll(e.root)
}

// mounted is the strata mount under soak.
type mounted struct {
	dir, cacheDir string
	pid           int
	metrics       string // http://addr/metrics
}

func mountBucket(e *env, mc *testserver.MinIO, bucket string, c config) (*mounted, error) {
	bin, err := testserver.BinDir()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	m := &mounted{dir: e.TempDir(), cacheDir: cacheDirOf(e.root), metrics: "http://" + addr + "/metrics"}
	args := []string{"mount", "s3://" + bucket, m.dir, "--cache-dir", m.cacheDir,
		"--endpoint-url", mc.Endpoint, "--force-path-style", "--region", mc.Region, "--read-only",
		"--memory-limit", fmt.Sprint(c.memoryLimit), "--cache-size", fmt.Sprint(c.cacheSize),
		"--metadata-ttl", "indefinite", "--metrics-addr", addr}
	cmd := exec.Command(filepath.Join(bin, "strata"), args...)
	cmd.Env = append(os.Environ(), mc.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("strata mount: %v: %s", err, out)
	}
	var s struct {
		PID int `json:"pid"`
	}
	b, _ := os.ReadFile(filepath.Join(m.cacheDir, "session.json"))
	if err := jsonUnmarshal(b, &s); err != nil || s.PID == 0 {
		m.unmount()
		return nil, fmt.Errorf("no pid in session.json: %v", err)
	}
	m.pid = s.PID
	return m, nil
}

func (m *mounted) alive() bool { return m.pid > 0 && syscall.Kill(m.pid, 0) == nil }

func (m *mounted) unmount() {
	if err := exec.Command("umount", m.dir).Run(); err != nil {
		_ = exec.Command("umount", "-l", m.dir).Run() // best effort: the wait below tells
	}
	for deadline := time.Now().Add(30 * time.Second); m.alive() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}

// sample is one look at the mount process.
type sample struct {
	Label      string  `json:"label,omitempty"`
	At         float64 `json:"at_s"`
	RSS        int64   `json:"rss_bytes"`
	RSSAnon    int64   `json:"rss_anon_bytes"` // the process's own memory (RSS less mapped files)
	Threads    int     `json:"threads"`
	FDs        int     `json:"fds"`
	CacheFDs   int     `json:"cache_fds"`  // of which cache files (kept open for idle objects, by design)
	Goroutines int     `json:"goroutines"` // -1: no metrics
}

type sampler struct {
	pid     int
	metrics string
	objects string // <cache-dir>/objects/
	start0  time.Time
	mu      sync.Mutex
	samples []sample
}

func newSampler(m *mounted) *sampler {
	return &sampler{pid: m.pid, metrics: m.metrics, objects: filepath.Join(m.cacheDir, "objects") + "/", start0: time.Now()}
}

// sample reads /proc/<pid>/status and fd, and go_goroutines.
func (s *sampler) sample(label string) sample {
	x := sample{Label: label, At: time.Since(s.start0).Seconds(), Goroutines: -1}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), ":")
			fields := strings.Fields(v)
			if len(fields) == 0 {
				continue
			}
			n, _ := strconv.ParseInt(fields[0], 10, 64)
			switch k {
			case "VmRSS":
				x.RSS = n << 10
			case "RssAnon":
				x.RSSAnon = n << 10
			case "Threads":
				x.Threads = int(n)
			}
		}
		f.Close()
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", s.pid)
	if es, err := os.ReadDir(fdDir); err == nil {
		x.FDs = len(es)
		for _, e := range es {
			if t, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && strings.HasPrefix(t, s.objects) {
				x.CacheFDs++
			}
		}
	}
	x.Goroutines = scrapeGoroutines(s.metrics)
	s.mu.Lock()
	s.samples = append(s.samples, x)
	s.mu.Unlock()
	return x
}

// start samples every interval until the returned stop is called.
func (s *sampler) start(every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.sample("")
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (s *sampler) all() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}

var metricsClient = &http.Client{Timeout: 5 * time.Second}

// scrapeGoroutines reads go_goroutines from the mount's Prometheus
// endpoint, or -1.
func scrapeGoroutines(url string) int {
	resp, err := metricsClient.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int(n)
			}
		}
	}
	return -1
}
