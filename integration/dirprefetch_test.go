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
			if _, err := os.ReadDir(filepath.Join(m.dir, "train")); err != nil {
				t.Fatal(err)
			}
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

// TestWarmOnMount: --warm-on-mount hydrates a prefix in the background, so
// the first epoch then reads nothing from the bucket, even with it gone.
func TestWarmOnMount(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := map[string][]byte{"keep/a": randData(1, 3<<20), "keep/sub/b": randData(2, 200<<10), "skip/c": randData(3, 1<<20)}
	put(t, srv.writer(t, bucket), files)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--warm-on-mount", "/keep", "--metadata-ttl", "indefinite")
	want := int64(3<<20 + 200<<10)
	var s session
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if s, _ = readSessionNow(t, m); s.FetchedBytes >= want {
			break
		}
	}
	if s.FetchedBytes != want {
		t.Fatalf("warmed %d bytes, want %d (only keep/)", s.FetchedBytes, want)
	}
	srv.stop(t)
	if d := diffTrees(expect(files, "keep/"), tree(t, filepath.Join(m.dir, "keep"))); d != "" {
		t.Fatalf("reading the warmed prefix with the bucket gone:\n%s", d)
	}
}

// TestDirPrefetchWaitsForAShareOfABigDirectory: a few random files of a big
// directory are a sample, not a walk (a DataLoader's first batch over
// 1,000-file directories opens two or three in each): the directory is
// warmed only once 3% of its small files have been opened.
func TestDirPrefetchWaitsForAShareOfABigDirectory(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := map[string][]byte{}
	var total int64
	for i := range 200 { // 3% is 6 files
		d := randData(uint64(i), 1<<10)
		files[fmt.Sprintf("train/img%03d.jpg", i)] = d
		total += int64(len(d))
	}
	put(t, srv.writer(t, bucket), files)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	read := func(i int) {
		if _, err := os.ReadFile(filepath.Join(m.dir, "train", fmt.Sprintf("img%03d.jpg", i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{7, 123, 191} {
		read(i)
	}
	// Had three files started warming it, 200 KiB from a local MinIO
	// would be in by now.
	time.Sleep(time.Second)
	if s, _ := readSessionNow(t, m); s.FetchedBytes != 3<<10 {
		t.Fatalf("fetched %d bytes after 3 of 200 files were read, want 3 KiB (not warmed)", s.FetchedBytes)
	}
	for _, i := range []int{11, 54, 88} {
		read(i)
	}
	var s session
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s, _ = readSessionNow(t, m); s.FetchedBytes >= total {
			break
		}
	}
	if s.FetchedBytes != total {
		t.Fatalf("fetched %d of %d bytes after 6 of 200 files were read: the directory was not warmed", s.FetchedBytes, total)
	}
}
