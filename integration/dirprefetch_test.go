package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDirPrefetch: opening a few small files of a directory makes the mount
// fetch the directory's other small files in the background (and only
// with --dir-prefetch on).
func TestDirPrefetch(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := map[string][]byte{}
	var total int64
	for i := range 40 {
		d := randData(uint64(i), 100<<10)
		files[fmt.Sprintf("train/img%02d.jpg", i)] = d
		total += int64(len(d))
	}
	put(t, srv.writer(t, bucket), files)
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("dir-prefetch=", on), func(t *testing.T) {
			m := startMount(t, srv, srv.source(bucket, ""), "", fmt.Sprint("--dir-prefetch=", on))
			os.ReadDir(filepath.Join(m.dir, "train"))
			for _, i := range []int{7, 23, 31} {
				if _, err := os.ReadFile(filepath.Join(m.dir, "train", fmt.Sprintf("img%02d.jpg", i))); err != nil {
					t.Fatal(err)
				}
			}
			var s session
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				s, _ = readSessionNow(t, m)
				if !on || s.FetchedBytes >= total {
					break
				}
			}
			if on && s.FetchedBytes < total {
				t.Fatalf("fetched %d of %d bytes: the directory was not warmed", s.FetchedBytes, total)
			}
			if !on && s.FetchedBytes > 3*(100<<10) {
				t.Fatalf("fetched %d bytes with --dir-prefetch=false (3 files read)", s.FetchedBytes)
			}
			want := expect(files, "train/")
			if d := diffTrees(want, tree(t, filepath.Join(m.dir, "train"))); d != "" {
				t.Fatal(d)
			}
		})
	}
}
