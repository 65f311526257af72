package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratafs/strata/backend"
)

// TestNamesLongerThan255Bytes: a name the namespace cannot hold (over
// 255 bytes, README "The namespace") is refused with ENAMETOOLONG by
// every call that takes one, before any request (a lookup does not say
// EIO, nothing is left to upload, `strata sync` ends); a 255-byte name
// round-trips to the bucket.
func TestNamesLongerThan255Bytes(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			long := filepath.Join(m.dir, strings.Repeat("l", 256))
			tooLong := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, syscall.ENAMETOOLONG) {
					t.Errorf("%s of a 256-byte name: %v (want ENAMETOOLONG)", op, err)
				}
			}
			_, err := os.Open(long)
			tooLong("open", err)
			_, err = os.Stat(long)
			tooLong("stat", err)
			f, err := os.Create(long)
			tooLong("create", err)
			if err == nil { // leave nothing for the rest of the test to wait on
				f.Close()
				os.Remove(long)
			}
			tooLong("mkdir", os.Mkdir(long, 0o755))
			tooLong("unlink", os.Remove(long))
			src := filepath.Join(m.dir, "short")
			if _, err := writeFile(src, []byte("short name")); err != nil {
				t.Fatal(err)
			}
			tooLong("rename", os.Rename(src, long))
			if err := os.Mkdir(filepath.Join(m.dir, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			tooLong("rename of a directory", os.Rename(filepath.Join(m.dir, "d"), long))

			// 255 bytes is a name: created, and renamed to. (Not tested as a
			// directory: MinIO stores a "name/" marker under a longer name of
			// its own and refuses a 255-byte one; S3 takes it.)
			data := randData(255, 70000)
			name := strings.Repeat("n", 255)
			if _, err := writeFile(filepath.Join(m.dir, name), data); err != nil {
				t.Fatalf("a 255-byte name: %v", err)
			}
			renamed := strings.Repeat("r", 255)
			if err := os.Rename(src, filepath.Join(m.dir, renamed)); err != nil {
				t.Fatalf("rename to a 255-byte name: %v", err)
			}
			out := runSync(t, m) // ends: nothing is left failing or retrying
			if us := listUploads(t, m); len(us) != 0 {
				t.Fatalf("uploads left after sync: %+v\n%s", us, out)
			}
			for key, want := range map[string][]byte{name: data, renamed: []byte("short name")} {
				if got, n, err := bucketSHA(t, w, key); err != nil || got != sha(want) {
					t.Errorf("%.20s... in the bucket: %d bytes, %v", key, n, err)
				}
			}
			if _, _, err := bucketSHA(t, w, "short"); !errors.Is(err, backend.ErrNotExist) {
				t.Errorf("the renamed file's old name is still in the bucket: %v", err)
			}
			names := listNames(t, m.dir)
			for _, n := range []string{name, renamed} {
				if !strings.Contains(strings.Join(names, "\n"), n) {
					t.Errorf("%.20s... not listed: %d names", n, len(names))
				}
			}
		})
	}
}
