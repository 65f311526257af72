package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWritesOnFullDisk: with the cache filesystem physically full, writes
// return ENOSPC (never a silent truncation), reads keep working, nothing
// half-written reaches the bucket, and writing works again once there is
// room.
func TestWritesOnFullDisk(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	data := randData(11, 3<<20)
	put(t, w, map[string][]byte{"r.bin": data})
	disk := tmpfs(t, 48<<20)
	// --cache-size larger than the disk: the disk itself says no.
	logFile := filepath.Join(t.TempDir(), "strata.log")
	m := startMount(t, srv, srv.source(bucket, ""), filepath.Join(disk, "cache"),
		"--cache-size", "1GiB", "--log-file", logFile)
	filler := fillDisk(t, disk, 1<<20)

	_, err := writeStream(filepath.Join(m.dir, "big.ckpt"), 12, 16<<20)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing 16 MiB on a full disk: %v (want ENOSPC)", err)
	}
	if h, _, err := fileSHA(filepath.Join(m.dir, "r.bin")); err != nil || h != sha(data) {
		t.Fatalf("read with the disk full: %v", err)
	}
	if _, _, err := bucketSHA(t, w, "big.ckpt"); err == nil {
		t.Fatal("a file whose writes failed reached the bucket")
	}

	os.Remove(filler)
	want := streamSHA(13, 8<<20)
	if _, err := writeStream(filepath.Join(m.dir, "after.ckpt"), 13, 8<<20); err != nil {
		out, _ := exec.Command("sh", "-c", "df -k "+disk+"; grep -v INFO "+logFile+" | tail -5").CombinedOutput()
		t.Fatalf("writing once there is room again: %v\n%s", err, out)
	}
	if got, _, err := bucketSHA(t, w, "after.ckpt"); err != nil || got != want {
		t.Fatalf("after.ckpt in the bucket: %v", err)
	}
}

// TestFailedWriteLeavesOldContent: when a write into an existing file fails
// (the disk is full), the file keeps its previous content, in the bucket and
// through the mount: whole or not at all.
func TestFailedWriteLeavesOldContent(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	old := randData(21, 2<<20)
	put(t, w, map[string][]byte{"ckpt.pt": old})
	disk := tmpfs(t, 40<<20)
	m := startMount(t, srv, srv.source(bucket, ""), filepath.Join(disk, "cache"),
		"--cache-size", "1GiB", "--log-file", filepath.Join(t.TempDir(), "strata.log"))
	if h, _, _ := fileSHA(filepath.Join(m.dir, "ckpt.pt")); h != sha(old) {
		t.Fatal("first read")
	}
	fillDisk(t, disk, 1<<20)
	if _, err := writeStream(filepath.Join(m.dir, "ckpt.pt"), 22, 16<<20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("overwrite on a full disk: %v (want ENOSPC)", err)
	}
	if got, _, err := bucketSHA(t, w, "ckpt.pt"); err != nil || got != sha(old) {
		t.Fatalf("the bucket lost the previous checkpoint: %v", err)
	}
	if h, n, err := fileSHA(filepath.Join(m.dir, "ckpt.pt")); err != nil || h != sha(old) {
		t.Fatalf("the mount shows %d bytes, not the previous content: %v", n, err)
	}
}

// TestWritesOnADiskFullerThanNinetyPercent: without --cache-size the cache
// keeps a tenth of its filesystem free, but that tenth is the cache's
// margin, not the writers': on a disk already fuller than 90% a checkpoint
// written through the mount is staged and uploaded (sync and async alike),
// and a write fails with ENOSPC only within 64 MiB of full.
func TestWritesOnADiskFullerThanNinetyPercent(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			disk := tmpfs(t, 1<<30)
			logFile := filepath.Join(t.TempDir(), "strata.log")
			m := startMount(t, srv, srv.source(bucket, ""), filepath.Join(disk, "cache"),
				"--upload", mode, "--log-file", logFile)
			fillDisk(t, disk, 100<<20) // under the 102 MiB the cache keeps free
			want := streamSHA(31, 16<<20)
			time.Sleep(1100 * time.Millisecond) // the cache re-reads the disk's free space once a second
			if _, err := writeStream(filepath.Join(m.dir, "ckpt.pt"), 31, 16<<20); err != nil {
				out, _ := exec.Command("sh", "-c", "df -k "+disk+"; grep -v INFO "+logFile+" | tail -5").CombinedOutput()
				t.Fatalf("writing 16 MiB with 100 MiB free: %v\n%s", err, out)
			}
			if out, err := exec.Command(binPath(t), "sync", m.dir).CombinedOutput(); err != nil {
				t.Fatalf("strata sync: %v\n%s", err, out)
			}
			if got, _, err := bucketSHA(t, w, "ckpt.pt"); err != nil || got != want {
				t.Fatalf("ckpt.pt in the bucket: %v", err)
			}
			if _, err := writeStream(filepath.Join(m.dir, "big.pt"), 32, 96<<20); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("writing 96 MiB with at most 100 MiB free: %v (want ENOSPC)", err)
			}
			if _, _, err := bucketSHA(t, w, "big.pt"); err == nil {
				t.Fatal("a file whose writes failed reached the bucket")
			}
		})
	}
}
