package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratafs/strata/internal/testserver"
)

// emulatorOnly is fake-gcs-server started the way its README shows (no
// -public-host), reached the way a user points a GCS client at it: only
// STORAGE_EMULATOR_HOST, no --endpoint-url. That server serves the XML
// API only for its public host, so a mount reading through XML listed
// fine and then failed every read with ENOENT.
type emulatorOnly struct{ gcsServer }

func (s *emulatorOnly) flags() []string { return nil }

// TestMountDefaultStartedFakeGCS: a mount of a default-started
// fake-gcs-server through STORAGE_EMULATOR_HOST lists and reads every
// file with the right bytes, and writes one back.
func TestMountDefaultStartedFakeGCS(t *testing.T) {
	requireFUSE(t)
	srv := &emulatorOnly{gcsServer{f: testserver.StartFakeGCSWith(t, testserver.FakeGCSOptions{Memory: true, NoPublicHost: true}), memory: true}}
	bucket := srv.newBucket(t)
	files := map[string][]byte{
		"a.bin":         bytes.Repeat([]byte("a"), 3<<20+17),
		"dir/b.txt":     []byte("hello from the emulator\n"),
		"dir/sub/c.bin": bytes.Repeat([]byte{7, 1, 9}, 100_000),
	}
	put(t, srv.writer(t, bucket), files)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	for k, want := range files {
		got, err := os.ReadFile(filepath.Join(m.dir, k))
		if err != nil {
			t.Fatalf("read %s: %v\n%s", k, err, logTail(m.cacheDir))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, want %d (content differs)", k, len(got), len(want))
		}
	}
	p := filepath.Join(m.dir, "dir", "new.txt")
	if err := os.WriteFile(p, []byte("written back"), 0o644); err != nil {
		t.Fatalf("write through the emulator: %v", err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "written back" {
		t.Errorf("read back %q: %v", got, err)
	}
}
