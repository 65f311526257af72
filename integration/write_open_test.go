package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestAppendRightAfterARead: `cat f; echo x >> f`. The read is served by
// passthrough and its RELEASE reaches the daemon after close() returned;
// the append that follows at once must not fail with EBUSY (the kernel
// cannot mix a passthrough reader and a userspace writer on one inode,
// so the open waits for that RELEASE), in both upload modes, 50 times.
func TestAppendRightAfterARead(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			want := randData(81, 256<<10)
			put(t, w, map[string][]byte{"log.txt": want})
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			p := filepath.Join(m.dir, "log.txt")
			for i := range 50 {
				got, err := os.ReadFile(p)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("read %d: %d bytes, equal %v: %v", i, len(got), bytes.Equal(got, want), err)
				}
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatalf("append %d right after a read: %v", i, err)
				}
				line := []byte{'x', byte('0' + i%10), '\n'}
				if _, err := f.Write(line); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatalf("close of append %d: %v", i, err)
				}
				want = append(want, line...)
			}
			runSync(t, m)
			if got, n, err := bucketSHA(t, w, "log.txt"); err != nil || got != sha(want) {
				t.Fatalf("the bucket holds %d bytes, want %d: %v", n, len(want), err)
			}
		})
	}
}
