package sidecar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/csi"
)

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	if err := Probe(dir); err == nil || !strings.Contains(err.Error(), "no volume") {
		t.Fatalf("no volume yet: %v", err)
	}
	for _, v := range []string{"vol-a", "vol-b"} {
		if err := os.MkdirAll(filepath.Join(dir, v), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "vol-a", csi.ReadyName), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vol-b", csi.ErrorName), []byte("bucket gone"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Probe(dir); err == nil || !strings.Contains(err.Error(), "vol-b not served yet bucket gone") {
		t.Fatalf("one volume not served: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vol-b", csi.ReadyName), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Probe(dir); err != nil {
		t.Fatalf("every volume served: %v", err)
	}
}

// TestSetCredentialsRestores: a hand-off's credentials are in the
// environment (and its files on disk, owner only) while a backend is
// built, and the environment is as it was afterwards.
func TestSetCredentialsRestores(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "the-nodes-own")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "") // restored after the test
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	os.Unsetenv("GOOGLE_APPLICATION_CREDENTIALS")
	dir := filepath.Join(t.TempDir(), "creds")
	h := csi.Handoff{
		Env:   map[string]string{"AWS_ACCESS_KEY_ID": "volume-key", "AWS_SECRET_ACCESS_KEY": "volume-secret"},
		Files: map[string][]byte{"key.json": []byte(`{"type":"service_account"}`)},
	}
	restore, err := setCredentials(h, dir)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") != "volume-key" || os.Getenv("AWS_SECRET_ACCESS_KEY") != "volume-secret" {
		t.Errorf("the hand-off's credentials are not in the environment")
	}
	if os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") != filepath.Join(dir, "key.json") {
		t.Errorf("GOOGLE_APPLICATION_CREDENTIALS = %q", os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"))
	}
	fi, err := os.Stat(filepath.Join(dir, "key.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key.json: %v, mode %v; want a 0600 file", err, fi.Mode())
	}
	restore()
	if os.Getenv("AWS_ACCESS_KEY_ID") != "the-nodes-own" {
		t.Errorf("AWS_ACCESS_KEY_ID not restored: %q", os.Getenv("AWS_ACCESS_KEY_ID"))
	}
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS"} {
		if _, set := os.LookupEnv(k); set {
			t.Errorf("%s left set", k)
		}
	}
}
