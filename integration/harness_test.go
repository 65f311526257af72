package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/gcs"
	"github.com/stratafs/strata/backend/s3"
	"github.com/stratafs/strata/internal/testserver"
)

// server is an object store the end-to-end tests run against: MinIO for
// S3, fake-gcs-server for GCS.
type server interface {
	name() string
	newBucket(t *testing.T) string
	source(bucket, prefix string) string
	flags() []string
	env() []string
	writer(t *testing.T, bucket string) backend.Writer
	stop(t *testing.T)
	restart(t *testing.T)
	// oddKeys reports whether the store keeps keys that are not valid
	// paths (a//b, .., a key that is also a prefix) as they are.
	oddKeys() bool
}

type minioServer struct{ m *testserver.MinIO }

func startMinIO(t *testing.T) server { return &minioServer{testserver.StartMinIO(t)} }

func (s *minioServer) name() string                  { return "minio" }
func (s *minioServer) newBucket(t *testing.T) string { return s.m.NewBucket(t) }
func (s *minioServer) source(b, p string) string     { return "s3://" + b + "/" + p }
func (s *minioServer) flags() []string {
	return []string{"--endpoint-url", s.m.Endpoint, "--force-path-style", "--region", s.m.Region}
}
func (s *minioServer) env() []string { return s.m.Env() }
func (s *minioServer) oddKeys() bool { return false }
func (s *minioServer) stop(t *testing.T) {
	if err := s.m.Stop(); err != nil {
		t.Fatal(err)
	}
}
func (s *minioServer) restart(t *testing.T) {
	if err := s.m.Restart(); err != nil {
		t.Fatal(err)
	}
}
func (s *minioServer) writer(t *testing.T, bucket string) backend.Writer {
	o := s3.DefaultOptions()
	o.Endpoint, o.ForcePathStyle, o.Region = s.m.Endpoint, true, s.m.Region
	o.AccessKeyID, o.SecretAccessKey = s.m.AccessKey, s.m.SecretKey
	be, err := s3.New(context.Background(), bucket, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

type gcsServer struct {
	f      *testserver.FakeGCS
	memory bool
}

// startFakeGCS runs fake-gcs-server on its filesystem backend, which
// survives a restart.
func startFakeGCS(t *testing.T) server { return &gcsServer{f: testserver.StartFakeGCS(t)} }

// startFakeGCSMemory runs its memory backend, which (unlike the filesystem
// one) keeps keys that are not paths: a//b, a key that is also a prefix.
func startFakeGCSMemory(t *testing.T) server {
	return &gcsServer{f: testserver.StartFakeGCSWith(t, testserver.FakeGCSOptions{Memory: true}), memory: true}
}

func (s *gcsServer) name() string                  { return "fakegcs" }
func (s *gcsServer) newBucket(t *testing.T) string { return s.f.NewBucket(t) }
func (s *gcsServer) source(b, p string) string     { return "gs://" + b + "/" + p }
func (s *gcsServer) flags() []string               { return []string{"--endpoint-url", s.f.Endpoint} }
func (s *gcsServer) env() []string                 { return s.f.Env() }
func (s *gcsServer) oddKeys() bool                 { return s.memory }
func (s *gcsServer) stop(t *testing.T) {
	if err := s.f.Stop(); err != nil {
		t.Fatal(err)
	}
}
func (s *gcsServer) restart(t *testing.T) {
	if s.memory {
		t.Fatal("fake-gcs-server in memory mode loses its data on restart")
	}
	if err := s.f.Restart(); err != nil {
		t.Fatal(err)
	}
}
func (s *gcsServer) writer(t *testing.T, bucket string) backend.Writer {
	o := gcs.DefaultOptions()
	o.Endpoint = s.f.Endpoint
	be, err := gcs.New(context.Background(), bucket, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// servers runs fn against every object store.
func servers(t *testing.T, fn func(t *testing.T, srv server)) {
	for _, s := range []struct {
		name  string
		start func(*testing.T) server
	}{{"minio", startMinIO}, {"fakegcs", startFakeGCS}} {
		t.Run(s.name, func(t *testing.T) { fn(t, s.start(t)) })
	}
}

func requireFUSE(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end mount test (-short)")
	}
	if os.Geteuid() != 0 {
		testserver.SkipOrFail(t, "end-to-end mount tests need root and /dev/fuse")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testserver.SkipOrFail(t, "end-to-end mount tests need /dev/fuse: %v", err)
	}
}

// put uploads files (key -> bytes).
func put(t *testing.T, w backend.Writer, files map[string][]byte) {
	t.Helper()
	for k, v := range files {
		if _, err := w.Put(context.Background(), k, bytes.NewReader(v), int64(len(v)), backend.PutOptions{}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
}

// mount is one running `strata mount` (in the background, as users run it).
type mount struct {
	t        *testing.T
	dir      string
	cacheDir string
	pid      int
	args     []string
	env      []string
}

// startMount mounts source with the server's flags plus extra; it fails
// the test if the command does.
func startMount(t *testing.T, srv server, source, cacheDir string, extra ...string) *mount {
	t.Helper()
	m, out, err := tryMount(t, srv, source, cacheDir, extra...)
	if err != nil {
		t.Fatalf("strata mount: %v\n%s\n%s", err, out, logTail(cacheDir))
	}
	return m
}

func tryMount(t *testing.T, srv server, source, cacheDir string, extra ...string) (*mount, string, error) {
	t.Helper()
	bin := testserver.Binary(t, "strata")
	dir := t.TempDir()
	if cacheDir == "" {
		cacheDir = t.TempDir()
	}
	args := append([]string{"mount", source, dir, "--cache-dir", cacheDir, "--log-level", "debug"}, srv.flags()...)
	args = append(args, extra...)
	env := append(os.Environ(), srv.env()...)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, string(out), err
	}
	m := &mount{t: t, dir: dir, cacheDir: cacheDir, args: args, env: env}
	if s, ok := readSession(cacheDir); ok {
		m.pid = s.PID
	}
	t.Cleanup(func() {
		m.unmount()
		if t.Failed() {
			t.Logf("strata log:\n%s", logTail(cacheDir))
		}
	})
	return m, string(out), nil
}

// unmount unmounts and waits for the strata process to exit (it flushes
// the index on the way out).
func (m *mount) unmount() {
	if m.pid == 0 {
		return
	}
	how := "umount"
	if out, err := exec.Command("umount", m.dir).CombinedOutput(); err != nil {
		how = fmt.Sprintf("umount -l (umount: %v %s)", err, bytes.TrimSpace(out))
		if out, err := exec.Command("umount", "-l", m.dir).CombinedOutput(); err != nil {
			m.t.Logf("umount -l %s: %v %s", m.dir, err, out)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(m.pid, 0) != nil {
			m.pid = 0
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.t.Errorf("strata (pid %d) still running 30s after %s", m.pid, how)
	// The test has failed already: what the daemon was waiting on is the
	// evidence (SIGQUIT makes Go write every goroutine to its log).
	_ = syscall.Kill(m.pid, syscall.SIGQUIT)
	for i := 0; i < 100 && syscall.Kill(m.pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(m.pid, syscall.SIGKILL)
	m.pid = 0
	m.t.Logf("the daemon's goroutines in FUSE handlers or in its shutdown:\n%s", stuckGoroutines(m.cacheDir))
}

// stuckGoroutines picks, from the goroutine dump SIGQUIT wrote to a
// mount's log, those serving a FUSE request or closing the mount (what
// keeps it from exiting), at most 24 KB.
func stuckGoroutines(cacheDir string) string {
	b, _ := os.ReadFile(filepath.Join(cacheDir, "strata.log"))
	var out []string
	n := 0
	for _, g := range strings.Split(string(b), "\n\n") {
		if !strings.HasPrefix(g, "goroutine ") || !(strings.Contains(g, "handleRequest") || strings.Contains(g, "(*Mount).Close") || strings.Contains(g, "main.")) {
			continue
		}
		if n += len(g); n > 24<<10 {
			out = append(out, "...")
			break
		}
		out = append(out, g)
	}
	return strings.Join(out, "\n\n")
}

type session struct {
	PID          int   `json:"pid"`
	FetchedBytes int64 `json:"fetched_bytes"`
	Fetches      int64 `json:"fetches"`
	UsedBytes    int64 `json:"used_bytes"`
	PTOpens      int64 `json:"passthrough_opens"`
	Running      bool  `json:"running"`
}

func readSession(cacheDir string) (session, bool) {
	var s session
	b, err := os.ReadFile(filepath.Join(cacheDir, "session.json"))
	if err != nil || json.Unmarshal(b, &s) != nil {
		return s, false
	}
	return s, true
}

func logTail(cacheDir string) string {
	b, _ := os.ReadFile(filepath.Join(cacheDir, "strata.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// tree reads every regular file under dir: relative path -> sha256.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		h, _, err := fileSHA(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel] = h
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	return got
}

// expect turns uploaded files into what the mount must show under prefix.
func expect(files map[string][]byte, prefix string) map[string]string {
	want := map[string]string{}
	for k, v := range files {
		if rel, ok := strings.CutPrefix(k, prefix); ok && !strings.HasSuffix(rel, "/") {
			want[rel] = sha(v)
		}
	}
	return want
}

func diffTrees(want, got map[string]string) string {
	var b strings.Builder
	for k, v := range want {
		if got[k] != v {
			fmt.Fprintf(&b, "  %s: want %.12s got %.12s\n", k, v, got[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "  %s: unexpected\n", k)
		}
	}
	return b.String()
}

// listNames lists dir, directories with a trailing slash, sorted.
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var out []string
	for _, e := range es {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
