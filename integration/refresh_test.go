package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// --metadata-ttl indefinite trusts what it looked up forever: an object
// changed in the bucket behind the mount's back reads as ESTALE at every
// open. The log line says what to do, and `strata refresh` does it: the
// next open reads the new bytes.
func TestRefreshAfterChangeUnderIndefiniteTTL(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	v1 := map[string][]byte{
		"data/x.bin":   randData(1, 3<<20+11),
		"data/y.txt":   []byte("y, first version\n"),
		"data/sub/z.t": []byte("z\n"),
	}
	put(t, w, v1)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--metadata-ttl", "indefinite", "--allow-other")
	x, y := filepath.Join(m.dir, "data", "x.bin"), filepath.Join(m.dir, "data", "y.txt")
	if _, err := os.ReadDir(filepath.Join(m.dir, "data")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{x, y} {
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
	}

	v2 := map[string][]byte{
		"data/x.bin":   randData(2, 2<<20+5),
		"data/y.txt":   []byte("y, second version, longer\n"),
		"data/new.txt": []byte("new\n"),
	}
	put(t, w, v2) // behind the mount's back
	for range 2 { // every open, not just the first
		if _, err := os.ReadFile(x); !errors.Is(err, syscall.ESTALE) {
			t.Fatalf("reading a file changed in the bucket under --metadata-ttl indefinite: %v, want ESTALE", err)
		}
	}
	if log := logTail(m.cacheDir); !strings.Contains(log, "strata refresh "+m.dir+" data/x.bin") {
		t.Fatalf("the ESTALE log line does not say how to refresh:\n%s", log)
	}

	// Another user may read the files (--allow-other), not refresh them.
	reachable(t, m)
	if out, err := runAs(t, binaryForOthers(t), "refresh", m.dir, "data/x.bin"); err == nil || !strings.Contains(out, "only root") {
		t.Fatalf("strata refresh by another user: %v\n%s", err, out)
	}

	out := refresh(t, m, "data/x.bin")
	if !strings.Contains(out, "changed in the bucket") {
		t.Errorf("strata refresh output: %s", out)
	}
	if b, err := os.ReadFile(x); err != nil || !bytes.Equal(b, v2["data/x.bin"]) {
		t.Fatalf("x.bin after refresh: %v (%d bytes, want the new %d)", err, len(b), len(v2["data/x.bin"]))
	}
	if _, err := os.ReadFile(y); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("y.txt, not refreshed: %v, want ESTALE still", err)
	}

	// No PATH: the whole mount, new names included.
	refresh(t, m)
	if b, err := os.ReadFile(y); err != nil || !bytes.Equal(b, v2["data/y.txt"]) {
		t.Fatalf("y.txt after refreshing the mount: %v %q", err, b)
	}
	ents, err := os.ReadDir(filepath.Join(m.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"new.txt", "sub", "x.bin", "y.txt"}) {
		t.Fatalf("data/ after refreshing the mount: %v", names)
	}
}

// refresh runs `strata refresh` on m and returns its output.
func refresh(t *testing.T, m *mount, paths ...string) string {
	t.Helper()
	out, err := exec.Command(binPath(t), append([]string{"refresh", m.dir}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("strata refresh %v: %v\n%s", paths, err, out)
	}
	return string(out)
}
