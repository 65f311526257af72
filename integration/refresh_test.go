package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stratafs/strata/backend"
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

// Under the default TTL, a read that finds its object changed in the
// bucket fails with ESTALE (its handle keeps the version it opened), and
// the name is looked up again then: the next open reads the new version
// at once, not after the TTL (a minute by default; before, every open of
// the name failed with ESTALE until then). A deleted object's name is
// gone at once the same way.
func TestOpenAfterAStaleReadReadsTheNewVersion(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		v1 := map[string][]byte{"ckpt/latest.bin": randData(1, 8<<20), "ckpt/old.bin": randData(2, 8<<20)}
		put(t, w, v1)
		m := startMount(t, srv, srv.source(bucket, ""), "") // default --metadata-ttl
		p, old := filepath.Join(m.dir, "ckpt/latest.bin"), filepath.Join(m.dir, "ckpt/old.bin")
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		g, err := os.Open(old)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		buf := make([]byte, 4096)
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		v2 := randData(3, 9<<20)
		put(t, w, map[string][]byte{"ckpt/latest.bin": v2}) // behind the mount's back
		if err := w.(backend.Deleter).Delete(context.Background(), "ckpt/old.bin"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(buf, 7<<20); !errors.Is(err, syscall.ESTALE) {
			t.Fatalf("uncached read of a replaced object: %v, want ESTALE", err)
		}
		if _, err := g.ReadAt(buf, 7<<20); !errors.Is(err, syscall.ESTALE) {
			t.Fatalf("uncached read of a deleted object: %v, want ESTALE", err)
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, v2) {
			t.Fatalf("open after the stale read: %v, %d bytes; want the new version's %d", err, len(b), len(v2))
		}
		if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat of the deleted object after the stale read: %v, want ENOENT", err)
		}
		if log := logTail(m.cacheDir); !strings.Contains(log, "a new open reads the bucket's version") {
			t.Errorf("the ESTALE log line does not say the name was looked up again:\n%s", log)
		}
	})
}
