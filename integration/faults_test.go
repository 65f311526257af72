package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/internal/testserver"
)

// Network and server faults between a real mount and MinIO: toxiproxy for
// what TCP can do (latency spikes, resets, connections cut after some
// bytes, a black hole, refused connections) and an HTTP proxy for what
// only a server can do (503 SlowDown, 500, bodies cut or reset part way,
// requests that never get an answer).

// toxiproxy drives a toxiproxy-server started for one test.
type toxiproxy struct{ api string }

func startToxiproxy(t *testing.T) *toxiproxy {
	t.Helper()
	bin := testserver.Binary(t, "toxiproxy-server")
	port := testserver.FreePort(t)
	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-seed", "8")
	log, err := os.Create(filepath.Join(t.TempDir(), "toxiproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // a server: killed, not stopped
		_ = cmd.Wait()         // its error is the kill
		log.Close()
	})
	tp := &toxiproxy{api: fmt.Sprintf("http://127.0.0.1:%d", port)}
	if err := testserver.WaitHTTP(tp.api+"/version", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return tp
}

func (tp *toxiproxy) call(t *testing.T, method, path string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, tp.api+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("toxiproxy %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("toxiproxy %s %s: %s %s", method, path, resp.Status, msg)
	}
}

// proxy forwards a new local port to upstream and returns its address.
func (tp *toxiproxy) proxy(t *testing.T, name, upstream string) string {
	t.Helper()
	listen := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	tp.call(t, "POST", "/proxies", map[string]any{"name": name, "listen": listen, "upstream": upstream, "enabled": true})
	return listen
}

func (tp *toxiproxy) toxic(t *testing.T, proxy, name, typ, stream string, toxicity float64, attrs map[string]int64) {
	t.Helper()
	tp.call(t, "POST", "/proxies/"+proxy+"/toxics", map[string]any{
		"name": name, "type": typ, "stream": stream, "toxicity": toxicity, "attributes": attrs})
}

func (tp *toxiproxy) removeToxic(t *testing.T, proxy, name string) {
	t.Helper()
	tp.call(t, "DELETE", "/proxies/"+proxy+"/toxics/"+name, nil)
}

func (tp *toxiproxy) enable(t *testing.T, proxy string, on bool) {
	t.Helper()
	tp.call(t, "POST", "/proxies/"+proxy, map[string]any{"enabled": on})
}

// faultProxy is an HTTP reverse proxy in front of an S3 server that fails
// a deterministic share of requests the way S3 does. The Host header is
// kept, so signatures stay valid.
type faultProxy struct {
	rp    *httputil.ReverseProxy
	seed  uint64
	n     atomic.Uint64
	stall atomic.Int64 // stalls left to inject (each costs an attempt timeout)
	// What was injected.
	slowDown, internal, resets, cuts, stalls, spikes, requests atomic.Int64
}

func newFaultProxy(t *testing.T, upstream string, seed uint64, stalls int64) (*faultProxy, string) {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{rp: httputil.NewSingleHostReverseProxy(u), seed: seed}
	p.rp.ErrorLog = nil
	p.stall.Store(stalls)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// draw is a uniform number in [0, 1) for the i-th request.
func (p *faultProxy) draw(i uint64, salt string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s", p.seed, i, salt)
	return float64(h.Sum64()>>11) / (1 << 53)
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
}

// ServeHTTP fails 5% of requests: 1.5% 503 SlowDown, 1% 500, 1% bodies
// reset part way, 1% bodies cut short, 0.5% never answered (up to the
// stall allowance, else a 500); and delays 1% by 0.5-2 s.
func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := p.n.Add(1)
	p.requests.Add(1)
	if d := p.draw(i, "spike"); d < 0.01 {
		p.spikes.Add(1)
		time.Sleep(500*time.Millisecond + time.Duration(d*150*float64(time.Second)))
	}
	get := r.Method == http.MethodGet && r.Header.Get("Range") != ""
	switch d := p.draw(i, "fault"); {
	case d < 0.015:
		p.slowDown.Add(1)
		s3Error(w, http.StatusServiceUnavailable, "SlowDown")
	case d < 0.025:
		p.internal.Add(1)
		s3Error(w, http.StatusInternalServerError, "InternalError")
	case d < 0.035 && get:
		p.resets.Add(1)
		p.rp.ServeHTTP(&cutWriter{ResponseWriter: w, frac: p.draw(i, "at"), rst: true}, r)
	case d < 0.045 && get:
		p.cuts.Add(1)
		p.rp.ServeHTTP(&cutWriter{ResponseWriter: w, frac: p.draw(i, "at")}, r)
	case d < 0.05 && p.stall.Add(-1) >= 0:
		p.stalls.Add(1)
		select { // the client's attempt timeout gives up first
		case <-r.Context().Done():
		case <-time.After(5 * time.Minute):
		}
	case d < 0.05:
		p.internal.Add(1)
		s3Error(w, http.StatusInternalServerError, "InternalError")
	default:
		p.rp.ServeHTTP(w, r)
	}
}

func (p *faultProxy) String() string {
	return fmt.Sprintf("%d requests: %d SlowDown, %d 500, %d bodies reset, %d bodies cut, %d stalled, %d latency spikes",
		p.requests.Load(), p.slowDown.Load(), p.internal.Load(), p.resets.Load(), p.cuts.Load(), p.stalls.Load(), p.spikes.Load())
}

func (p *faultProxy) failures() int64 {
	return p.slowDown.Load() + p.internal.Load() + p.resets.Load() + p.cuts.Load() + p.stalls.Load()
}

var errCut = errors.New("faultproxy: body cut")

// cutWriter passes the status and headers, then a fraction of the body,
// then drops the connection (with a RST if rst).
type cutWriter struct {
	http.ResponseWriter
	frac float64
	rst  bool
	left int64
	cut  bool
}

func (w *cutWriter) WriteHeader(code int) {
	n, _ := strconv.ParseInt(w.Header().Get("Content-Length"), 10, 64)
	w.left = -1 // pass everything through: nothing to cut
	if code/100 == 2 && n > 1 {
		w.left = 1 + int64(w.frac*float64(n-1))
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *cutWriter) Write(b []byte) (int, error) {
	if w.cut {
		return 0, errCut
	}
	if w.left < 0 || int64(len(b)) < w.left {
		w.left -= int64(len(b))
		return w.ResponseWriter.Write(b)
	}
	n, _ := w.ResponseWriter.Write(b[:w.left])
	w.cut = true
	http.NewResponseController(w.ResponseWriter).Flush()
	if conn, _, err := http.NewResponseController(w.ResponseWriter).Hijack(); err == nil {
		if tc, ok := conn.(*net.TCPConn); ok && w.rst {
			_ = tc.SetLinger(0) // fails only on a closed connection
		}
		conn.Close()
	}
	return n, errCut
}

// putParallel uploads files with 16 concurrent PUTs.
func putParallel(t *testing.T, w backend.Writer, files map[string][]byte) {
	t.Helper()
	keys := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				if _, err := w.Put(context.Background(), k, bytes.NewReader(files[k]), int64(len(files[k])), backend.PutOptions{}); err != nil {
					t.Errorf("put %s: %v", k, err)
				}
			}
		}()
	}
	for k := range files {
		keys <- k
	}
	close(keys)
	wg.Wait()
}

// boundedReaders has n readers read every file, each in its own order,
// and checks every byte and that no read takes longer than bound. It
// returns the slowest read.
func boundedReaders(t *testing.T, dir string, want map[string]string, n int, bound time.Duration) time.Duration {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	var wg sync.WaitGroup
	var slowest atomic.Int64
	var bad atomic.Int64
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := keys[(i*7+g*len(keys)/n)%len(keys)]
				start := time.Now()
				b, err := os.ReadFile(filepath.Join(dir, k))
				d := time.Since(start)
				for s := slowest.Load(); int64(d) > s && !slowest.CompareAndSwap(s, int64(d)); s = slowest.Load() {
				}
				if (err != nil || sha(b) != want[k] || d > bound) && bad.Add(1) <= 10 {
					t.Errorf("reader %d: %s: %v after %v (right bytes: %v)", g, k, err, d.Round(time.Millisecond), err == nil && sha(b) == want[k])
				}
			}
		}()
	}
	wg.Wait()
	return time.Duration(slowest.Load())
}

// faultTree is 2,000 files: mostly 1-64 KiB, every 100th 1-4 MiB.
func faultTree() map[string][]byte {
	files := map[string][]byte{}
	for i := range 2000 {
		n := 1 + (i*7919)%(64<<10)
		if i%100 == 0 {
			n = 1<<20 + (i*104729)%(3<<20)
		}
		files[fmt.Sprintf("shard%02d/%04d.bin", i%40, i)] = randData(uint64(5000+i), n)
	}
	return files
}

// endpointOf is the --endpoint-url flag of a mount through addr.
func endpointOf(addr string) []string {
	if !strings.HasPrefix(addr, "http") {
		addr = "http://" + addr
	}
	return []string{"--endpoint-url", addr}
}

// TestReadsUnderNetworkFaults: 2,000 files read by 8 readers through
// toxiproxy (latency spikes, 5% of connections reset, 5% cut after 256
// KiB) and an S3-level proxy failing 5% of requests: every byte is right
// and no read takes longer than the bound.
func TestReadsUnderNetworkFaults(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // mostly waits out stalled requests, as TestBackendGone does
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := faultTree()
	putParallel(t, srv.writer(t, bucket), files)
	fp, fpURL := newFaultProxy(t, srv.m.Endpoint, 8, 3)
	tp := startToxiproxy(t)
	addr := tp.proxy(t, "s3", strings.TrimPrefix(fpURL, "http://"))
	tp.toxic(t, "s3", "spikes", "latency", "downstream", 1, map[string]int64{"latency": 1, "jitter": 30})
	tp.toxic(t, "s3", "resets", "reset_peer", "downstream", 0.05, map[string]int64{"timeout": 1500})
	tp.toxic(t, "s3", "cutoff", "limit_data", "downstream", 0.05, map[string]int64{"bytes": 256 << 10})
	m := startMount(t, srv, srv.source(bucket, ""), "", append(endpointOf(addr), "--metadata-ttl", "indefinite")...)

	// A stalled GET costs one 3 s attempt timeout, a stalled lookup (HEAD
	// or LIST) one 30 s attempt timeout.
	const bound = time.Minute
	slowest := boundedReaders(t, m.dir, expect(files, ""), 8, bound)
	t.Logf("%d reads, slowest %v; injected: %s", 8*len(files), slowest.Round(time.Millisecond), fp)
	if fp.slowDown.Load() == 0 || fp.internal.Load() == 0 || fp.resets.Load() == 0 || fp.cuts.Load() == 0 || fp.stalls.Load() == 0 {
		t.Errorf("a kind of fault was never injected: %s", fp)
	}
	if got := float64(fp.failures()) / float64(fp.requests.Load()); got < 0.03 {
		t.Errorf("only %.1f%% of requests failed", 100*got)
	}
}

// eioBound is README's promise for the bucket unreachable: "uncached reads
// return EIO within 10 seconds", counted from the moment the backend went
// away. The mount gives a GET 8 s to be answered, retries included.
const eioBound = 10 * time.Second

// TestBackendGone: with the endpoint refusing connections, or swallowing
// them (a black hole), a read of uncached data returns EIO within
// eioBound while cached data and listings keep being served; reads recover
// when the endpoint returns. The two cases run in parallel.
func TestBackendGone(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := map[string][]byte{"cached.bin": randData(1, 3<<20), "uncached.bin": randData(2, 3<<20), "small.txt": []byte("small")}
	put(t, srv.writer(t, bucket), files)
	tp := startToxiproxy(t)
	for _, tc := range []struct {
		name       string
		down, back func(proxy string)
	}{
		{"refused", func(p string) { tp.enable(t, p, false) }, func(p string) { tp.enable(t, p, true) }},
		// Connections are accepted and never answered: every attempt
		// waits out its timeout.
		{"blackhole", func(p string) {
			tp.toxic(t, p, "hole-up", "timeout", "upstream", 1, map[string]int64{"timeout": 0})
			tp.toxic(t, p, "hole-down", "timeout", "downstream", 1, map[string]int64{"timeout": 0})
		}, func(p string) { tp.removeToxic(t, p, "hole-up"); tp.removeToxic(t, p, "hole-down") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := tp.proxy(t, tc.name, srv.m.Addr)
			m := startMount(t, srv, srv.source(bucket, ""), "", append(endpointOf(addr), "--metadata-ttl", "indefinite")...)
			read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(m.dir, name)) }
			if b, err := read("cached.bin"); err != nil || !bytes.Equal(b, files["cached.bin"]) {
				t.Fatalf("cached.bin: %v", err)
			}
			if es, err := os.ReadDir(m.dir); err != nil || len(es) != len(files) {
				t.Fatalf("listing: %d entries, %v", len(es), err)
			}
			start := time.Now() // the backend goes away now
			tc.down(tc.name)
			_, err := read("uncached.bin")
			took := time.Since(start)
			if !errors.Is(err, syscall.EIO) || took > eioBound {
				t.Errorf("uncached read with the backend gone: %v after %v (want EIO within %v, as README says)", err, took, eioBound)
			}
			t.Logf("EIO after %v", took.Round(time.Millisecond))
			for _, name := range []string{"cached.bin", "small.txt", "cached.bin"} {
				b, err := read(name)
				if name == "small.txt" {
					continue // listed but never read: EIO or (if fetched with the listing) bytes
				}
				if err != nil || !bytes.Equal(b, files[name]) {
					t.Errorf("%s with the backend gone: %v", name, err)
				}
			}
			if es, err := os.ReadDir(m.dir); err != nil || len(es) != len(files) {
				t.Errorf("listing with the backend gone: %d entries, %v", len(es), err)
			}
			tc.back(tc.name)
			deadline := time.Now().Add(20 * time.Second)
			for {
				b, err := read("uncached.bin")
				if err == nil && bytes.Equal(b, files["uncached.bin"]) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("uncached.bin 20s after the backend came back: %v", err)
				}
				time.Sleep(250 * time.Millisecond)
			}
		})
	}
}
