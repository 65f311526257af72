package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/faults"
	"github.com/stratafs/strata/backend/local"
)

// scrape serves m over HTTP and parses what a Prometheus server would get.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv, err := m.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + srv.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// value finds the sample of family name whose labels include want; for
// histograms it is the sample count.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		}
	}
	return 0, false
}

func newLocal(t *testing.T, files map[string]string) backend.Backend {
	t.Helper()
	dir := t.TempDir()
	for k, v := range files {
		p := filepath.Join(dir, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	be, err := local.New(dir, local.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return be
}

func TestBackendRequests(t *testing.T) {
	ctx := context.Background()
	m := New()
	fb := faults.New(newLocal(t, map[string]string{"a/x": "0123456789", "a/y": "abcdefghij"}), faults.DefaultOptions())
	fb.SetHook(faults.OpRead, func(_ context.Context, c faults.Call) faults.Fault {
		if c.Key == "a/y" {
			return faults.Fault{BodyErr: io.ErrUnexpectedEOF, BodyAfter: 4}
		}
		return faults.Fault{}
	})
	be := m.WrapBackend(fb.Backend())
	if be.String() != fb.String() {
		t.Fatalf("String() = %q, want the wrapped %q (it is the cache identity)", be.String(), fb.String())
	}
	if _, err := be.Stat(ctx, "a/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Stat(ctx, "nope"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("stat nope: %v", err)
	}
	if _, err := be.List(ctx, "a/", backend.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		rc, err := be.ReadRange(ctx, "a/x", "", 2, 5)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	rc, err := be.ReadRange(ctx, "a/y", "", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, rc); err == nil {
		t.Fatal("the injected body error did not surface")
	}
	rc.Close()
	w := be.(backend.Writer)
	if _, err := w.Put(ctx, "a/z", bytes.NewReader([]byte("hello")), 5, backend.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	fams := scrape(t, m)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"strata_backend_requests_total", map[string]string{"op": "stat", "status": "ok"}, 1},
		{"strata_backend_requests_total", map[string]string{"op": "stat", "status": "not_found"}, 1},
		{"strata_backend_requests_total", map[string]string{"op": "list", "status": "ok"}, 1},
		{"strata_backend_requests_total", map[string]string{"op": "read", "status": "ok"}, 3},
		{"strata_backend_requests_total", map[string]string{"op": "put", "status": "ok"}, 1},
		{"strata_backend_request_duration_seconds", map[string]string{"op": "read", "status": "ok"}, 3},
		{"strata_backend_bytes_total", map[string]string{"op": "read", "direction": "received"}, 5 + 5 + 4},
		{"strata_backend_bytes_total", map[string]string{"op": "put", "direction": "sent"}, 5},
		{"strata_backend_body_errors_total", map[string]string{"op": "read"}, 1},
	}
	for _, tc := range tests {
		got, ok := value(fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
}

// Wrappers of a backend with only some optional interfaces.
type (
	readOnly   struct{ backend.Backend }
	writerOnly struct {
		backend.Backend
		backend.Writer
	}
	copyDelete struct {
		backend.Backend
		backend.Copier
		backend.Deleter
	}
)

// The wrapper offers exactly the optional interfaces of what it wraps.
func TestBackendOptionalInterfaces(t *testing.T) {
	ctx := context.Background()
	lb := newLocal(t, map[string]string{"k": "v"}).(*local.Backend)
	tests := []struct {
		name    string
		inner   backend.Backend
		w, d, c bool
	}{
		{"all", lb, true, true, true},
		{"read only", readOnly{lb}, false, false, false},
		{"writer only", writerOnly{lb, lb}, true, false, false},
		{"copy and delete", copyDelete{lb, lb, lb}, false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			be := m.WrapBackend(tc.inner)
			_, w := be.(backend.Writer)
			_, d := be.(backend.Deleter)
			_, c := be.(backend.Copier)
			if w != tc.w || d != tc.d || c != tc.c {
				t.Fatalf("Writer %v Deleter %v Copier %v, want %v %v %v", w, d, c, tc.w, tc.d, tc.c)
			}
			_, innerChecks := tc.inner.(backend.Checker)
			if ch, ok := be.(backend.Checker); ok != innerChecks {
				t.Errorf("Checker %v, want %v", ok, innerChecks)
			} else if ok {
				if err := ch.Check(ctx); err != nil {
					t.Errorf("Check: %v", err)
				}
			}
			if c {
				if _, err := be.(backend.Copier).Copy(ctx, "k", "", "k2"); err != nil {
					t.Fatalf("Copy: %v", err)
				}
				if v, _ := value(scrape(t, m), "strata_backend_requests_total", map[string]string{"op": "copy", "status": "ok"}); v != 1 {
					t.Errorf("copy not counted: %v", v)
				}
			}
		})
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{backend.ErrNotExist, "not_found"},
		{errWrap(backend.ErrVersionChanged), "version_changed"},
		{errWrap(backend.ErrAccessDenied), "access_denied"},
		{errWrap(backend.ErrUnavailable), "unavailable"},
		{errWrap(backend.ErrNoBucket), "no_bucket"},
		{errWrap(backend.ErrPreconditionFailed), "precondition_failed"},
		{context.Canceled, "canceled"},
		{errWrap(context.DeadlineExceeded), "timeout"},
		{errors.New("boom"), "error"},
	}
	for _, tc := range tests {
		if got := Status(tc.err); got != tc.want {
			t.Errorf("Status(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func errWrap(err error) error { return errors.Join(errors.New("s3: op key"), err) }

func TestFUSEOps(t *testing.T) {
	m := New()
	for range 3 {
		m.ObserveFUSE("read", 2*time.Millisecond, 0)
	}
	m.ObserveFUSE("lookup", 50*time.Microsecond, syscall.ENOENT)
	m.ObserveFUSE("lookup", 30*time.Microsecond, 0)
	fams := scrape(t, m)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"strata_fuse_ops_total", map[string]string{"op": "read", "result": "ok"}, 3},
		{"strata_fuse_ops_total", map[string]string{"op": "lookup", "result": "ENOENT"}, 1},
		{"strata_fuse_ops_total", map[string]string{"op": "lookup", "result": "ok"}, 1},
		{"strata_fuse_op_duration_seconds", map[string]string{"op": "read"}, 3},
		{"strata_fuse_op_duration_seconds", map[string]string{"op": "lookup"}, 2},
	}
	for _, tc := range tests {
		if got, ok := value(fams, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	var sum float64
	for _, mt := range fams["strata_fuse_op_duration_seconds"].GetMetric() {
		sum += mt.GetHistogram().GetSampleSum()
	}
	if want := 3*0.002 + 50e-6 + 30e-6; sum < want*0.999 || sum > want*1.001 {
		t.Errorf("latency sum %v, want %v", sum, want)
	}
}

func TestUploadQueueHookAndInfo(t *testing.T) {
	m := New()
	if v, ok := value(scrape(t, m), "strata_upload_queue_objects", nil); !ok || v != 0 {
		t.Fatalf("upload queue before registration = %v (found %v), want 0", v, ok)
	}
	m.SetUploadQueue(func() UploadQueue { return UploadQueue{Objects: 3, Bytes: 3 << 20, OldestAge: 90 * time.Second} })
	m.SetInfo(Info{Version: "v1.2.3", Source: "s3://b/p/", Mount: "/mnt/x", IOEngine: "pread"})
	fams := scrape(t, m)
	for name, want := range map[string]float64{
		"strata_upload_queue_objects":        3,
		"strata_upload_queue_bytes":          3 << 20,
		"strata_upload_queue_oldest_seconds": 90,
		"strata_mount_info":                  1,
	} {
		if v, ok := value(fams, name, nil); !ok || v != want {
			t.Errorf("%s = %v (found %v), want %v", name, v, ok, want)
		}
	}
	if _, ok := value(fams, "strata_mount_info", map[string]string{"source": "s3://b/p/", "io_engine": "pread"}); !ok {
		t.Error("strata_mount_info lacks its labels")
	}
	m.SetUploadQueue(nil)
	if v, _ := value(scrape(t, m), "strata_upload_queue_bytes", nil); v != 0 {
		t.Errorf("upload queue after unregistering = %v", v)
	}
}

func TestListenErrors(t *testing.T) {
	m := New()
	s, err := m.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := m.Listen(s.Addr); err == nil || !strings.Contains(err.Error(), s.Addr) {
		t.Fatalf("second listen on %s: %v, want an error naming the address", s.Addr, err)
	}
	resp, err := http.Get("http://" + s.Addr + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %s", resp.Status)
	}
	s.Close()
	s.Close() // idempotent
	if _, err := http.Get("http://" + s.Addr + "/metrics"); err == nil {
		t.Error("endpoint still serving after Close")
	}
}
