package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stratafs/strata/backend"
)

// TestKeysOverTheBucketsLimitAreRefused: S3 and GCS keep keys of up to
// 1,024 bytes. A file, directory or rename whose key would be longer is
// refused at once with ENAMETOOLONG (README, the namespace), before a byte
// is written: such a file used to be accepted, written, and then fail at
// close with EIO, its upload marked failed for good ("KeyTooLongError"),
// kept for a retry that could never land. Nothing changes in the bucket.
func TestKeysOverTheBucketsLimitAreRefused(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket).(backend.Backend)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			tooLongKeys(t, srv, w, m)
		})
	}
	// The source's prefix is part of every key: 100 bytes of it leave
	// 924 for the path, which here is 803 + 1 + 130 bytes.
	t.Run("prefix", func(t *testing.T) {
		t.Parallel()
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket).(backend.Backend)
		prefix := strings.Repeat("p", 99) + "/"
		m := startMount(t, srv, srv.source(bucket, prefix), "")
		name := strings.Repeat("n", 200) + "/" + strings.Repeat("n", 200) + "/" + strings.Repeat("n", 200) + "/" + strings.Repeat("n", 200)
		if err := os.MkdirAll(filepath.Join(m.dir, name), 0o755); err != nil {
			t.Fatalf("an 803-byte directory under a 100-byte prefix: %v", err)
		}
		err := os.WriteFile(filepath.Join(m.dir, name, strings.Repeat("f", 130)), []byte("x"), 0o644)
		if !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Errorf("a 934-byte path under a 100-byte prefix (a 1,034-byte key): %v, want ENAMETOOLONG", err)
		}
		if keys := keysOf(t, w); len(keys) != 4 {
			t.Errorf("the bucket holds %d keys, want the 4 directory markers: %q", len(keys), keys)
		}
	})
}

// tooLongKeys refuses keys over 1,024 bytes on mount m of bucket w.
func tooLongKeys(t *testing.T, srv server, w backend.Backend, m *mount) {
	t.Helper()
	// 1,000 bytes of directories: "d...d/" x 5, each 200 bytes.
	deep := strings.Repeat(strings.Repeat("d", 199)+"/", 5)
	if err := os.MkdirAll(filepath.Join(m.dir, deep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, deep, "ok"), []byte("fits"), 0o644); err != nil {
		t.Fatalf("a 1,002-byte key: %v", err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "short"), []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(m.dir, "top"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "top", strings.Repeat("t", 100)), []byte("top"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStrata(t, srv, "sync", m.dir); err != nil {
		t.Fatal(err)
	}
	before := keysOf(t, w)

	long := strings.Repeat("f", 30) // 1,030 bytes
	wantTooLong := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Errorf("%s: %v, want ENAMETOOLONG", what, err)
		}
	}
	f, err := os.OpenFile(filepath.Join(m.dir, deep, long), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		_, _ = f.Write([]byte("lost"))
		err = f.Close()
	}
	wantTooLong("create of a 1,030-byte key", err)
	wantTooLong("mkdir of a 1,030-byte key", os.Mkdir(filepath.Join(m.dir, deep, long), 0o755))
	// A name that fits as a file but not as a directory marker ("x/").
	wantTooLong("mkdir of a 1,024-byte key", os.Mkdir(filepath.Join(m.dir, deep, strings.Repeat("m", 24)), 0o755))
	wantTooLong("rename to a 1,030-byte key", os.Rename(filepath.Join(m.dir, "short"), filepath.Join(m.dir, deep, long)))
	// The directory fits under its new name; its file does not.
	wantTooLong("rename of a directory whose file would pass 1,024 bytes",
		os.Rename(filepath.Join(m.dir, "top"), filepath.Join(m.dir, deep, "top")))

	if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
		t.Errorf("strata sync after the refusals: %v %s", err, errOut)
	}
	if after := keysOf(t, w); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("the bucket changed:\nbefore %q\nafter  %q", before, after)
	}
	for _, p := range []string{"short", "top/" + strings.Repeat("t", 100), deep + "ok"} {
		if _, err := os.Stat(filepath.Join(m.dir, p)); err != nil {
			t.Errorf("%s after the refusals: %v", p[:min(len(p), 20)], err)
		}
	}
}

func keysOf(t *testing.T, be backend.Backend) []string {
	t.Helper()
	objs, _, err := backend.ListAll(context.Background(), be, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	sort.Strings(keys)
	return keys
}

// TestNamesThatAreNotUTF8: S3 and GCS keys are UTF-8. A name that is not
// (a Latin-1 file name from an old archive) cannot be in the bucket, so a
// lookup answers ENOENT without asking it, and a create, mkdir or rename
// onto it fails with EILSEQ before anything is written (README, the
// namespace). Each used to send the request, get HTTP 400, and answer EIO
// with a warning in the log.
func TestNamesThatAreNotUTF8(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket).(backend.Backend)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	if err := os.WriteFile(filepath.Join(m.dir, "good"), []byte("good"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := keysOf(t, w)
	bad := filepath.Join(m.dir, "caf\xe9") // "café" in Latin-1
	if _, err := os.Stat(bad); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat of a Latin-1 name: %v, want ENOENT", err)
	}
	if err := os.WriteFile(bad, []byte("x"), 0o644); !errors.Is(err, syscall.EILSEQ) {
		t.Errorf("create of a Latin-1 name: %v, want EILSEQ", err)
	}
	if err := os.Mkdir(bad, 0o755); !errors.Is(err, syscall.EILSEQ) {
		t.Errorf("mkdir of a Latin-1 name: %v, want EILSEQ", err)
	}
	if err := os.Rename(filepath.Join(m.dir, "good"), bad); !errors.Is(err, syscall.EILSEQ) {
		t.Errorf("rename onto a Latin-1 name: %v, want EILSEQ", err)
	}
	if b, err := os.ReadFile(filepath.Join(m.dir, "good")); err != nil || string(b) != "good" {
		t.Errorf("the renamed file: %q %v", b, err)
	}
	if after := keysOf(t, w); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("the bucket changed: before %q, after %q", before, after)
	}
	if log := logTail(m.cacheDir); strings.Contains(log, "StatusCode: 400") {
		t.Errorf("a request for a name that cannot be a key reached the bucket:\n%s", log)
	}
}
