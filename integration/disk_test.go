package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A full cache filesystem: reads fall back to the backend (the fetched
// bytes are served even when they cannot be kept), the mount stays up, and
// nothing in the cache is corrupt afterwards.
//
// Write subsets wait for the write path (#5): writes into the mount must
// return ENOSPC on a full cache filesystem and leave nothing half-written.

// tmpfs mounts a tmpfs of size bytes for the test.
func tmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", dir).Run(); err != nil {
			if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
				t.Logf("clean-up: umount -l %s: %v %s", dir, err, out)
			}
		}
	})
	return dir
}

// fillDisk writes a file until the filesystem holding dir is full, leaving
// at most slack bytes free, and returns its path.
func fillDisk(t *testing.T, dir string, slack int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		free := int64(st.Bavail) * st.Bsize
		if free <= slack {
			return p
		}
		if _, err := f.Write(chunk[:min(int64(len(chunk)), free-slack)]); err != nil {
			return p // ENOSPC: as full as it gets
		}
	}
}

func diskTree() map[string][]byte {
	files := map[string][]byte{}
	for i := range 24 {
		n := 1 + i*1000
		if i%2 == 0 {
			n = 8<<20 + i*4097
		}
		files[fmt.Sprintf("d%d/f%02d", i%3, i)] = randData(uint64(300+i), n)
	}
	return files
}

func TestCacheDiskFull(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := diskTree()
	putParallel(t, srv.writer(t, bucket), files)
	want := expect(files, "")

	for _, tc := range []struct {
		name string
		// flags: a --cache-size larger than the filesystem makes the
		// cache write until the disk refuses; the default keeps 10% free
		// and another process fills the rest.
		flags  []string
		filler bool
	}{
		{"cache fills the disk", []string{"--cache-size", "1GiB"}, false},
		{"another process fills the disk", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := tmpfs(t, 64<<20)
			cacheDir := filepath.Join(disk, "cache")
			flags := append([]string{"--metadata-ttl", "indefinite", "--log-file", filepath.Join(t.TempDir(), "strata.log")}, tc.flags...)
			m := startMount(t, srv, srv.source(bucket, ""), cacheDir, flags...)
			if tc.filler {
				fillDisk(t, disk, 0)
			}
			for round := range 3 {
				if d := diffTrees(want, tree(t, m.dir)); d != "" {
					t.Fatalf("round %d with the cache disk full:\n%s", round, d)
				}
			}
			var st syscall.Statfs_t
			if err := syscall.Statfs(disk, &st); err != nil {
				t.Fatal(err)
			}
			t.Logf("free on the cache filesystem: %d KiB", int64(st.Bavail)*st.Bsize>>10)
			if syscall.Kill(m.pid, 0) != nil {
				t.Fatal("the mount died with its disk full")
			}
			m.unmount()
			os.Remove(filepath.Join(disk, "filler"))

			v := verifyCache(t, cacheDir)
			if v.BadBlocks != 0 {
				t.Errorf("verify after the disk was full: %+v", v)
			}
			t.Logf("cache after the disk was full: %d objects, %d KiB verified", v.Objects, v.Bytes>>10)
			m = startMount(t, srv, srv.source(bucket, ""), cacheDir, flags...)
			if d := diffTrees(want, tree(t, m.dir)); d != "" {
				t.Fatalf("remount after the disk was full:\n%s", d)
			}
			m.unmount()
			if n := corruptBlocks(t, cacheDir); n != 0 {
				t.Errorf("%d cached blocks failed their CRC after the disk was full", n)
			}
		})
	}
}
