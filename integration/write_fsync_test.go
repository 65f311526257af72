package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEveryFsyncUploads: each fsync of a file being written uploads what
// is written by then and returns once it is in the bucket, in both upload
// modes (README, write semantics: "fsync | uploads what is written and
// waits"), the second and third fsync of one descriptor as the first. In
// async mode the file is written by passthrough.
func TestEveryFsyncUploads(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t)
	for _, mode := range []string{"async", "sync"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			// As Python opens a file for writing ("wb"): O_RDWR (Go's
			// os.Create) takes the userspace path.
			f, err := os.OpenFile(filepath.Join(m.dir, "log.bin"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			data := randData(61, 3000)
			for i := 1; i <= 3; i++ {
				if _, err := f.Write(data[(i-1)*1000 : i*1000]); err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatalf("fsync %d: %v", i, err)
				}
				got, n, err := bucketSHA(t, w, "log.bin")
				if err != nil || got != sha(data[:i*1000]) {
					t.Fatalf("after fsync %d the bucket holds %d bytes (want the %d written, equal %v): %v",
						i, n, i*1000, got == sha(data[:i*1000]), err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
