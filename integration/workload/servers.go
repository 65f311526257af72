package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// MinIO is a MinIO server started by a standalone program (benchmark,
// demo) on 127.0.0.1, with its drive in a directory that may be reused
// across runs.
type MinIO struct {
	Endpoint             string // http://127.0.0.1:<port>
	Addr                 string
	AccessKey, SecretKey string
	Region               string
	DataDir              string
	proc                 *Proc
}

// PurgeTrash frees what MinIO still holds of deleted objects: it moves
// them to .minio.sys/tmp/.trash on its drive and removes them later, so
// deleting gigabytes frees no disk space for minutes.
func (m *MinIO) PurgeTrash() error {
	trash := filepath.Join(m.DataDir, ".minio.sys", "tmp", ".trash")
	ents, err := os.ReadDir(trash)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("workload: minio trash: %w", err)
	}
	for _, ent := range ents {
		if err := os.RemoveAll(filepath.Join(trash, ent.Name())); err != nil {
			return fmt.Errorf("workload: minio trash: %w", err)
		}
	}
	return nil
}

// StartMinIO starts bin/minio with its drive in dir/data and its log in
// dir/minio.log, and waits until its object layer answers.
func StartMinIO(ctx context.Context, dir string) (*MinIO, error) {
	bin, err := Tool("minio")
	if err != nil {
		return nil, err
	}
	m := &MinIO{AccessKey: "strata-bench", SecretKey: "strata-bench-secret", Region: "us-east-1",
		DataDir: filepath.Join(dir, "data")}
	if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("workload: minio: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		m.Addr = "127.0.0.1:" + strconv.Itoa(port)
		m.Endpoint = "http://" + m.Addr
		m.proc, err = StartProc("minio", filepath.Join(dir, "minio.log"), []string{
			"MINIO_ROOT_USER=" + m.AccessKey, "MINIO_ROOT_PASSWORD=" + m.SecretKey,
			"MINIO_REGION=" + m.Region, "MINIO_BROWSER=off", "MINIO_UPDATE=off",
		}, bin, "server", "--quiet", "--address", m.Addr, m.DataDir)
		if err != nil {
			return nil, err
		}
		if lastErr = m.waitReady(ctx, 60*time.Second); lastErr == nil {
			return m, nil
		}
		_ = m.proc.Stop(5 * time.Second)
	}
	return nil, fmt.Errorf("workload: minio did not start: %w\n%s", lastErr, m.proc.LogTail(2048))
}

func (m *MinIO) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	last := fmt.Errorf("no answer yet")
	for time.Now().Before(deadline) {
		if done, _ := m.proc.Exited(); done {
			return fmt.Errorf("minio exited during start-up")
		}
		resp, err := client.Get(m.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			st := resp.Header.Get("x-minio-server-status")
			if resp.StatusCode == http.StatusOK && st != "offline" {
				return nil
			}
			last = fmt.Errorf("status %d, server status %q", resp.StatusCode, st)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return last
}

// Env is the standard AWS environment for a client of this server.
func (m *MinIO) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + m.AccessKey, "AWS_SECRET_ACCESS_KEY=" + m.SecretKey,
		"AWS_REGION=" + m.Region, "AWS_DEFAULT_REGION=" + m.Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Stop stops the server (its data stays).
func (m *MinIO) Stop() error { return m.proc.Stop(10 * time.Second) }

// Log returns the tail of the server's log.
func (m *MinIO) Log() string { return m.proc.LogTail(4096) }

// FakeGCS is a fake-gcs-server started by a standalone program, with the
// filesystem backend in a directory.
type FakeGCS struct {
	Endpoint string // http://127.0.0.1:<port>
	Addr     string // value for STORAGE_EMULATOR_HOST
	proc     *Proc
}

// StartFakeGCS starts bin/fake-gcs-server with its storage in dir/data and
// waits for its health check.
func StartFakeGCS(ctx context.Context, dir string) (*FakeGCS, error) {
	bin, err := Tool("fake-gcs-server")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("workload: fake-gcs-server: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	f := &FakeGCS{Addr: "127.0.0.1:" + strconv.Itoa(port)}
	f.Endpoint = "http://" + f.Addr
	f.proc, err = StartProc("fake-gcs-server", filepath.Join(dir, "fake-gcs-server.log"), nil, bin,
		"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
		// A public host without a port matches any port of it: clients
		// reaching the server through a latency proxy (another port) get
		// the XML API too.
		"-public-host", "127.0.0.1", "-external-url", f.Endpoint, "-log-level", "warn",
		"-backend", "filesystem", "-filesystem-root", data)
	if err != nil {
		return nil, err
	}
	if err := awaitHTTP(ctx, f.proc, "fake-gcs-server", f.Endpoint+"/_internal/healthcheck", 30*time.Second); err != nil {
		return nil, err
	}
	return f, nil
}

// Env is the environment for a GCS client of this server.
func (f *FakeGCS) Env() []string { return []string{"STORAGE_EMULATOR_HOST=" + f.Addr} }

// Stop stops the server.
func (f *FakeGCS) Stop() error { return f.proc.Stop(5 * time.Second) }

// MakeBucket creates a bucket through the JSON API (an existing one is
// fine).
func (f *FakeGCS) MakeBucket(ctx context.Context, name string) error {
	ok := func(status int) bool { return status == http.StatusOK || status == http.StatusConflict }
	if err := postJSON(ctx, f.Endpoint+"/storage/v1/b?project=strata", map[string]string{"name": name}, ok); err != nil {
		return fmt.Errorf("workload: gcs bucket %s: %w", name, err)
	}
	return nil
}

// postJSON POSTs body as JSON to url. A response whose status ok refuses
// is an error carrying the status and the start of the response body.
func postJSON(ctx context.Context, url string, body any, ok func(status int) bool) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !ok(resp.StatusCode) {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
