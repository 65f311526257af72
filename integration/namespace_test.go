package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
)

// fsyncDir is fsync(2) on a directory, as `sync -d DIR` and Python's
// os.fsync(os.open(DIR, os.O_RDONLY)) do it.
func fsyncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fsync(fd)
}

// TestFsyncDirAfterAtomicWrite: the atomic-write pattern (write a
// temporary file, fsync it, rename it over the final name, fsync the
// directory) succeeds in both upload modes, with or without the file's
// fsync, and the bucket ends with the final name whole and no temporary.
// In sync mode the final name is in the bucket when fsync(dir) returns;
// in async mode the rename is journaled (a rename of a file closed here
// moves its pending upload) and goes up later, as a close does.
func TestFsyncDirAfterAtomicWrite(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			put(t, w, map[string][]byte{"ckpt/latest.pt": []byte("old checkpoint")})
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			dir := filepath.Join(m.dir, "ckpt")
			for _, fsyncFile := range []bool{true, false} {
				data := randData(uint64(len(mode))*7+boolSeed(fsyncFile), 3<<20+11)
				tmp, final := filepath.Join(dir, ".latest.pt.tmp"), filepath.Join(dir, "latest.pt")
				f, err := os.Create(tmp)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					t.Fatal(err)
				}
				if fsyncFile {
					if err := f.Sync(); err != nil {
						t.Fatalf("fsync of the temporary file: %v", err)
					}
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, final); err != nil {
					t.Fatal(err)
				}
				if err := fsyncDir(dir); err != nil {
					t.Fatalf("fsync of the directory (file fsync'd: %v): %v (want 0)", fsyncFile, err)
				}
				if err := fsyncDir(m.dir); err != nil {
					t.Fatalf("fsync of the mount's root: %v", err)
				}
				if mode == "sync" {
					if got, n, err := bucketSHA(t, w, "ckpt/latest.pt"); err != nil || got != sha(data) {
						t.Fatalf("file fsync'd %v: the final name is not whole in the bucket when fsync(dir) returns: %d bytes, %v", fsyncFile, n, err)
					}
				}
				runSync(t, m)
				if got, n, err := bucketSHA(t, w, "ckpt/latest.pt"); err != nil || got != sha(data) {
					t.Fatalf("file fsync'd %v: final in the bucket: %d bytes, %v", fsyncFile, n, err)
				}
				if _, _, err := bucketSHA(t, w, "ckpt/.latest.pt.tmp"); !errors.Is(err, backend.ErrNotExist) {
					t.Fatalf("file fsync'd %v: temporary left in the bucket: %v", fsyncFile, err)
				}
			}
		})
	}
}

func boolSeed(b bool) uint64 {
	if b {
		return 1
	}
	return 2
}

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
