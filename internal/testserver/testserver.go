// Package testserver starts the real servers Strata's tests run against
// (MinIO for S3, fake-gcs-server for GCS) on 127.0.0.1 with free ports and
// throwaway data directories. The binaries come from the repository's ./bin,
// where `make tools` installs them at pinned versions.
//
// When STRATA_E2E=1 (set by `make test`) a missing binary, or any other
// missing prerequisite a test reports through SkipOrFail, fails the test;
// otherwise the test is skipped with a message saying how to install it.
package testserver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// RepoRoot returns the directory holding go.mod, found by walking up from
// the working directory (go test runs in the package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testserver: no go.mod above the working directory")
		}
		dir = parent
	}
}

// BinDir is where `make tools` and `make build` put binaries: $STRATA_BIN_DIR
// if set, else <repo>/bin.
func BinDir() (string, error) {
	if d := os.Getenv("STRATA_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// Required reports whether end-to-end prerequisites must be present
// (make test sets STRATA_E2E=1): then a missing tool fails instead of skipping.
func Required() bool { return os.Getenv("STRATA_E2E") == "1" }

// SkipOrFail skips the test, saying why, or fails it when end-to-end
// prerequisites are required (see Required): under `make test` a skipped
// test would be a claim nobody checked. -short runs skip with t.Skip.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf("STRATA_E2E=1, where a skip is a failure: "+format, args...)
		return
	}
	tb.Skipf(format, args...)
}

// Binary returns the path of a tool in BinDir, failing or skipping the test
// when it is missing (see SkipOrFail).
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := BinDir()
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		SkipOrFail(tb, "%s not found at %s; run `make tools` (or `make test`, which does) to run this test", name, p)
	}
	return p
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitHTTP polls url until it answers with a status below 500 or the
// timeout passes.
func WaitHTTP(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	var lastErr error
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
			lastErr = fmt.Errorf("status %d", resp.StatusCode)
		} else {
			lastErr = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("testserver: %s not ready after %s: %v", url, timeout, lastErr)
}

// randomBucketName returns "strata-" and 12 random hex digits: a bucket
// name no other test uses.
func randomBucketName(tb testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return "strata-" + hex.EncodeToString(b[:])
}
