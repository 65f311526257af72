package testserver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MinIO is one MinIO server started for a test: a single drive in a
// temporary directory, listening on 127.0.0.1. Stop and Restart keep the
// port and the data directory, so a test can take the server away and bring
// it back with its buckets and objects intact.
type MinIO struct {
	// Endpoint is the S3 endpoint URL, "http://127.0.0.1:<port>".
	Endpoint string
	// Addr is "127.0.0.1:<port>".
	Addr string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// Region is the region MinIO answers for.
	Region string
	// DataDir holds the server's drive.
	DataDir string

	bin     string
	logPath string

	proc process
}

// minioStartTimeout bounds how long StartMinIO and Restart wait for
// /minio/health/live.
const minioStartTimeout = 60 * time.Second

// StartMinIO starts a MinIO server from BinDir on a free port with a fresh
// data directory and stops it when the test ends. A missing binary skips or
// fails the test as Binary does.
func StartMinIO(tb testing.TB) *MinIO {
	tb.Helper()
	bin := Binary(tb, "minio")
	dir := tb.TempDir()
	m := &MinIO{
		AccessKey: "strata-test",
		SecretKey: "strata-test-secret",
		Region:    "us-east-1",
		DataDir:   filepath.Join(dir, "data"),
		bin:       bin,
		logPath:   filepath.Join(dir, "minio.log"),
	}
	var err error
	// The port is free when chosen but another process may take it before
	// MinIO binds it: try a few ports.
	for attempt := 0; attempt < 3; attempt++ {
		m.Addr = fmt.Sprintf("127.0.0.1:%d", FreePort(tb))
		m.Endpoint = "http://" + m.Addr
		if err = m.start(); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatalf("testserver: start minio: %v", err)
	}
	tb.Cleanup(func() {
		if err := m.Stop(); err != nil {
			tb.Errorf("testserver: stop minio: %v", err)
		}
	})
	return m
}

// start launches the server on m.Addr and waits until it is live.
func (m *MinIO) start() error {
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(m.bin, "server", "--quiet", "--address", m.Addr, m.DataDir)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+m.AccessKey,
		"MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_REGION="+m.Region,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	done, err := m.proc.start(cmd)
	if err != nil {
		return err
	}

	ready := make(chan error, 1)
	go func() { ready <- m.waitReady(minioStartTimeout) }()
	select {
	case err = <-ready:
	case <-done:
		err = errors.New("minio exited during startup")
	}
	if err != nil {
		_ = m.Stop()
		return fmt.Errorf("%w\n--- minio log (tail) ---\n%s", err, m.logTail(4096))
	}
	return nil
}

// waitReady polls /minio/health/live until it answers 200 without the
// "x-minio-server-status: offline" header: live alone answers 200 before
// the object layer is up, and bucket requests then fail with 503.
func (m *MinIO) waitReady(timeout time.Duration) error {
	url := m.Endpoint + "/minio/health/live"
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	last := errors.New("no answer yet")
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			status := resp.Header.Get("x-minio-server-status")
			if resp.StatusCode == http.StatusOK && status != "offline" {
				return nil
			}
			last = fmt.Errorf("status %d, server status %q", resp.StatusCode, status)
		} else {
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %v", url, timeout, last)
}

// Stop terminates the server (SIGTERM, then SIGKILL after 10 s) and waits
// for it to exit. Stopping a stopped server does nothing.
func (m *MinIO) Stop() error { return m.proc.stop("minio", 10*time.Second) }

// Restart stops the server if it runs and starts it again on the same
// address with the same data directory.
func (m *MinIO) Restart() error {
	if err := m.Stop(); err != nil {
		return err
	}
	return m.start()
}

// Env returns the environment a subprocess needs to reach this server with
// the standard AWS variables (credentials, region, endpoint).
func (m *MinIO) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + m.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + m.SecretKey,
		"AWS_REGION=" + m.Region,
		"AWS_DEFAULT_REGION=" + m.Region,
		"AWS_ENDPOINT_URL=" + m.Endpoint,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// CreateBucket creates a bucket, failing the test on error.
func (m *MinIO) CreateBucket(tb testing.TB, name string) {
	tb.Helper()
	if err := m.MakeBucket(name); err != nil {
		tb.Fatalf("testserver: %v", err)
	}
}

// NewBucket creates a bucket with a fresh random name and returns the name.
func (m *MinIO) NewBucket(tb testing.TB) string {
	tb.Helper()
	name := randomBucketName(tb)
	m.CreateBucket(tb, name)
	return name
}

// MakeBucket creates a bucket with a SigV4-signed PUT (this package does
// not import the AWS SDK).
// A 503 (server still initialising) is retried for a few seconds.
func (m *MinIO) MakeBucket(name string) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		var retry bool
		if retry, err = m.makeBucket(name); !retry {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

func (m *MinIO) makeBucket(name string) (retry bool, err error) {
	req, err := http.NewRequest(http.MethodPut, m.Endpoint+"/"+name, nil)
	if err != nil {
		return false, err
	}
	signV4(req, m.AccessKey, m.SecretKey, m.Region, time.Now())
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return false, fmt.Errorf("create bucket %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		err = fmt.Errorf("create bucket %s: %s: %s", name, resp.Status, bytes.TrimSpace(body))
		return resp.StatusCode == http.StatusServiceUnavailable, err
	}
	return false, nil
}

// DeleteBucket removes bucket name and everything in it (MinIO's force
// delete), as a user deleting it under a live mount would.
func (m *MinIO) DeleteBucket(name string) error {
	req, err := http.NewRequest(http.MethodDelete, m.Endpoint+"/"+name, nil)
	if err != nil {
		return err
	}
	signV4(req, m.AccessKey, m.SecretKey, m.Region, time.Now())
	req.Header.Set("x-minio-force-delete", "true")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("delete bucket %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("delete bucket %s: %s: %s", name, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// Log returns the server's log so far, for failure messages.
func (m *MinIO) Log() string { return m.logTail(1 << 20) }

func (m *MinIO) logTail(n int64) string {
	b, err := os.ReadFile(m.logPath)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// signV4 signs a request without a body (AWS Signature Version 4, service
// s3, unsigned query string). It is enough for bucket administration.
func signV4(req *http.Request, accessKey, secretKey, region string, now time.Time) {
	const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	now = now.UTC()
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	req.Header.Set("x-amz-date", amzDate)
	req.Header.Set("x-amz-content-sha256", emptySHA)
	signed := "host;x-amz-content-sha256;x-amz-date"
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	canonical := strings.Join([]string{
		req.Method, path, req.URL.RawQuery,
		"host:" + req.URL.Host + "\n" +
			"x-amz-content-sha256:" + emptySHA + "\n" +
			"x-amz-date:" + amzDate + "\n",
		signed, emptySHA,
	}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+secretKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+accessKey+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
