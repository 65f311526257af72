package testserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FakeGCS is a fake-gcs-server process listening on 127.0.0.1 over plain
// HTTP. With the filesystem backend (the default) Stop and Restart keep
// both the port and the data, like MinIO's harness.
type FakeGCS struct {
	// Endpoint is "http://127.0.0.1:<port>", a custom endpoint for a GCS
	// client (the JSON API lives under /storage/v1/).
	Endpoint string
	// Addr is "127.0.0.1:<port>", the value of STORAGE_EMULATOR_HOST.
	Addr string
	// Port is the TCP port the server listens on.
	Port int
	// DataDir is the filesystem root of the server's storage.
	DataDir string
	// Memory reports the in-memory storage backend (see FakeGCSOptions).
	Memory bool

	bin      string
	logPath  string
	noPublic bool // started without -public-host

	proc process
}

// fakeGCSStartTimeout bounds how long the server may take to answer its
// health check after being started.
const fakeGCSStartTimeout = 20 * time.Second

// StartFakeGCS starts fake-gcs-server (from BinDir) on a free port of
// 127.0.0.1 with the filesystem backend in a temporary directory, waits
// until it answers, and stops it when the test ends. Resumable upload
// session URLs and XML-API downloads point back at the same address
// (-external-url and -public-host). The data survives Restart, but the
// filesystem backend cannot hold folder placeholder objects ("dir/"), a
// key that is also a prefix, or versioned buckets: StartFakeGCSWith with
// Memory for those.
func StartFakeGCS(tb testing.TB) *FakeGCS {
	tb.Helper()
	return StartFakeGCSWith(tb, FakeGCSOptions{})
}

// FakeGCSOptions select how StartFakeGCSWith runs the server.
type FakeGCSOptions struct {
	// Memory uses the in-memory storage backend instead of the filesystem
	// one. It models GCS more faithfully (folder placeholder objects such
	// as "dir/", a key and a prefix of the same name, object versioning)
	// but Stop loses the data: Restart then brings back an empty server.
	Memory bool
	// NoPublicHost starts the server the way its README shows, without
	// -public-host: it then serves XML API downloads only for the host
	// storage.googleapis.com, and a client must read through the JSON API.
	NoPublicHost bool
}

// StartFakeGCSWith is StartFakeGCS with a choice of storage backend.
func StartFakeGCSWith(tb testing.TB, opt FakeGCSOptions) *FakeGCS {
	tb.Helper()
	bin := Binary(tb, "fake-gcs-server")
	port := FreePort(tb)
	dir := tb.TempDir()
	f := &FakeGCS{
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port),
		Addr:     fmt.Sprintf("127.0.0.1:%d", port),
		Port:     port,
		DataDir:  filepath.Join(dir, "data"),
		Memory:   opt.Memory,
		noPublic: opt.NoPublicHost,
		bin:      bin,
		logPath:  filepath.Join(dir, "fake-gcs-server.log"),
	}
	if err := os.MkdirAll(f.DataDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := f.Stop(); err != nil {
			tb.Error(err)
		}
		if tb.Failed() {
			tb.Log(f.logTail(8 << 10))
		}
	})
	if err := f.start(); err != nil {
		tb.Fatal(err)
	}
	return f
}

// Env returns the environment a subprocess needs to reach this server
// through the Google client libraries.
func (f *FakeGCS) Env() []string {
	return []string{"STORAGE_EMULATOR_HOST=" + f.Addr}
}

// Running reports whether the server process is up.
func (f *FakeGCS) Running() bool { return f.proc.running() }

// Stop terminates the server (SIGTERM, then SIGKILL after 5 s) and waits
// for it to exit. The data directory is kept. Stopping a stopped server
// does nothing.
func (f *FakeGCS) Stop() error { return f.proc.stop("fake-gcs-server", 5*time.Second) }

// Pause stops the server's process with SIGSTOP: the endpoint goes
// silent (connections are accepted by the kernel, nothing is answered)
// until Resume. Stop and the test's cleanup still end it (SIGKILL).
func (f *FakeGCS) Pause() error { return f.proc.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (f *FakeGCS) Resume() error { return f.proc.signal(syscall.SIGCONT) }

// Restart stops the server if it runs and starts it again on the same
// port with the same data directory. With FakeGCSOptions.Memory the
// restarted server is empty.
func (f *FakeGCS) Restart() error {
	if err := f.Stop(); err != nil {
		return err
	}
	return f.start()
}

// CreateBucket creates a bucket, failing the test on error.
func (f *FakeGCS) CreateBucket(tb testing.TB, name string) {
	tb.Helper()
	if err := f.MakeBucket(name, false); err != nil {
		tb.Fatal(err)
	}
}

// CreateVersionedBucket creates a bucket with object versioning, so that
// replaced generations stay readable (memory backend only: the filesystem
// backend has no versioning).
func (f *FakeGCS) CreateVersionedBucket(tb testing.TB, name string) {
	tb.Helper()
	if err := f.MakeBucket(name, true); err != nil {
		tb.Fatal(err)
	}
}

// NewBucket creates a bucket with a fresh random name and returns the name.
func (f *FakeGCS) NewBucket(tb testing.TB) string {
	tb.Helper()
	name := randomBucketName(tb)
	f.CreateBucket(tb, name)
	return name
}

// MakeBucket creates a bucket through the JSON API.
func (f *FakeGCS) MakeBucket(name string, versioned bool) error {
	body := map[string]any{"name": name}
	if versioned {
		body["versioning"] = map[string]bool{"enabled": true}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, f.Endpoint+"/storage/v1/b?project=strata-test", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("testserver: create bucket %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("testserver: create bucket %s: %s: %s", name, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Log returns the server's log so far, for failure messages.
func (f *FakeGCS) Log() string { return f.logTail(1 << 20) }

// start launches the process and waits for the health check. It fails if
// the process exits first (a port taken in the meantime, say).
func (f *FakeGCS) start() error {
	logf, err := os.OpenFile(f.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	logStart, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	port := strconv.Itoa(f.Port)
	args := []string{
		"-scheme", "http",
		"-host", "127.0.0.1",
		"-port", port,
		"-external-url", f.Endpoint,
		"-log-level", "info", // start-up line below, and one line per request
	}
	if !f.noPublic {
		args = append(args, "-public-host", f.Addr)
	}
	if f.Memory {
		args = append(args, "-backend", "memory")
	} else {
		args = append(args, "-backend", "filesystem", "-filesystem-root", f.DataDir)
	}
	cmd := exec.Command(f.bin, args...)
	// FAKE_GCS_* variables would fill in the settings left to defaults.
	cmd.Env = fakeGCSEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	done, err := f.proc.start(cmd)
	if err != nil {
		return fmt.Errorf("testserver: start fake-gcs-server: %w", err)
	}

	if err := f.waitReady(logStart, done); err != nil {
		_ = f.Stop()
		return fmt.Errorf("%w\n%s", err, f.logTail(4096))
	}
	return nil
}

// waitReady polls until this process has logged that it listens on our
// port (written after it bound the port: a health check alone could be
// answered by another server holding the port) and answers its health
// check; it gives up when the process exits or fakeGCSStartTimeout passes.
func (f *FakeGCS) waitReady(logStart int64, done <-chan struct{}) error {
	marker := []byte("server started at http://127.0.0.1:" + strconv.Itoa(f.Port))
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(fakeGCSStartTimeout)
	last := errors.New("no start-up line in the log yet")
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return errors.New("testserver: fake-gcs-server exited during start-up")
		default:
		}
		if fakeGCSLogContains(f.logPath, logStart, marker) {
			resp, err := client.Get(f.Endpoint + "/_internal/healthcheck")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				err = fmt.Errorf("health check: %s", resp.Status)
			}
			last = err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("testserver: fake-gcs-server on %s not ready after %s: %v", f.Addr, fakeGCSStartTimeout, last)
}

// fakeGCSLogContains reports whether the log holds marker after offset.
func fakeGCSLogContains(path string, offset int64, marker []byte) bool {
	lf, err := os.Open(path)
	if err != nil {
		return false
	}
	defer lf.Close()
	b, err := io.ReadAll(io.NewSectionReader(lf, offset, 1<<20))
	return err == nil && bytes.Contains(b, marker)
}

// fakeGCSEnv is the process environment without variables that would
// change fake-gcs-server's configuration behind the flags' back.
func fakeGCSEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FAKE_GCS_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// logTail returns the last n bytes of the server's log.
func (f *FakeGCS) logTail(n int64) string {
	b, err := os.ReadFile(f.logPath)
	if err != nil {
		return ""
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return "fake-gcs-server log (tail):\n" + string(b)
}
