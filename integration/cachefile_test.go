package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cache file lost or cut short behind the mount's back (removed by
// hand, truncated, a disk tool) is never served as the object's bytes.
// After a clean unmount the next mount trusts the blocks its index
// records without re-reading them (README, "Crash safety"), so it used
// to re-create a missing file empty at full size and serve zeros (a
// shortened one: its tail as zeros), hit ratio 100%, no GET, no log
// line; `strata warm` said all was cached. Now a missing file means none
// of its blocks is present and a short one that those past its end are
// not: logged, fetched again, the bytes read equal the bucket's.

// lostFiles is a file of one block and one of several.
func lostFiles() map[string][]byte {
	return map[string][]byte{
		"rd/small":      randData(71, 100<<10),
		"rd/big200.bin": randData(72, 24<<20+123),
	}
}

// cacheFileOfSize is the one cache file of that size.
func cacheFileOfSize(t *testing.T, cacheDir string, size int64) string {
	t.Helper()
	var found []string
	for _, p := range cacheFiles(t, cacheDir) {
		if fi, err := os.Stat(p); err == nil && fi.Size() == size {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d cache files of %d bytes in %s; want 1", len(found), size, cacheDir)
	}
	return found[0]
}

// TestLostCacheFileIsRefetched: read both files, unmount cleanly, remove
// (or cut short) their cache files, mount again: every byte read equals
// the bucket's, the lost bytes were fetched again, the log says so, and
// the cache verifies clean. With passthrough (the default, handing fully
// cached files to the kernel) and without.
func TestLostCacheFileIsRefetched(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := lostFiles()
	put(t, srv.writer(t, bucket), files)
	small, big := files["rd/small"], files["rd/big200.bin"]

	for _, c := range []struct {
		name string
		lose func(t *testing.T, smallFile, bigFile string)
		lost int64 // bytes that must be fetched again
	}{
		{"removed", func(t *testing.T, s, b string) {
			for _, p := range []string{s, b} {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}, int64(len(small) + len(big))},
		{"truncated", func(t *testing.T, s, b string) {
			if err := os.Truncate(s, 1000); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(b, int64(len(big))/2); err != nil {
				t.Fatal(err)
			}
		}, int64(len(small) + len(big)/2 - 1<<20)}, // the block cut in two is lost too
	} {
		for _, pt := range []string{"auto", "off"} {
			t.Run(c.name+"/passthrough="+pt, func(t *testing.T) {
				cacheDir := t.TempDir()
				flags := []string{"--passthrough", pt}
				m := startMount(t, srv, srv.source(bucket, ""), cacheDir, flags...)
				readWhole(t, filepath.Join(m.dir, "rd/small"), small)
				readWhole(t, filepath.Join(m.dir, "rd/big200.bin"), big)
				m.unmount()

				c.lose(t, cacheFileOfSize(t, cacheDir, int64(len(small))), cacheFileOfSize(t, cacheDir, int64(len(big))))

				m = startMount(t, srv, srv.source(bucket, ""), cacheDir, flags...)
				readWhole(t, filepath.Join(m.dir, "rd/small"), small)
				readWhole(t, filepath.Join(m.dir, "rd/big200.bin"), big)
				m.unmount()

				s, ok := readSession(cacheDir)
				if !ok || s.Fetches == 0 || s.FetchedBytes < c.lost {
					t.Errorf("the remounted mount fetched %d bytes in %d GETs; want the %d bytes lost fetched again", s.FetchedBytes, s.Fetches, c.lost)
				}
				if log := logTail(cacheDir); !strings.Contains(log, "fetched again") {
					t.Errorf("the log does not say cache file blocks are fetched again:\n%s", log)
				}
				if v := verifyCache(t, cacheDir); v.BadBlocks != 0 || v.Bytes != int64(len(small)+len(big)) {
					t.Errorf("verify after the refetch: %+v", v)
				}
			})
		}
	}
}

// TestWarmRefetchesLostCacheFile: `strata warm` after the cache file of a
// fully read object was removed fetches it again instead of counting it
// as cached; the next mount then reads it with no GET.
func TestWarmRefetchesLostCacheFile(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := lostFiles()
	put(t, srv.writer(t, bucket), files)
	big := files["rd/big200.bin"]
	cacheDir := t.TempDir()
	source := srv.source(bucket, "")
	m := startMount(t, srv, source, cacheDir)
	readWhole(t, filepath.Join(m.dir, "rd/big200.bin"), big)
	m.unmount()
	if err := os.Remove(cacheFileOfSize(t, cacheDir, int64(len(big)))); err != nil {
		t.Fatal(err)
	}

	args := append([]string{"warm", source, "--cache-dir", cacheDir, "--prefix", "rd/big200.bin"}, srv.flags()...)
	out, errOut, err := runStrata(t, srv, args...)
	if err != nil {
		t.Fatalf("strata warm: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(out, "warmed 1 of 1 objects") || strings.Contains(out, "fetched 0B") {
		t.Errorf("warm after the cache file was removed: %q; want the object fetched again", out)
	}

	m = startMount(t, srv, source, cacheDir)
	readWhole(t, filepath.Join(m.dir, "rd/big200.bin"), big)
	m.unmount()
	if s, ok := readSession(cacheDir); !ok || s.Fetches != 0 {
		t.Errorf("after the warm, the mount sent %d GETs; want 0", s.Fetches)
	}
}

// TestShortCacheFileNotPassedThrough: a fully cached file's cache file
// cut short while mounted (page cache dropped, as after memory pressure)
// is not handed to the kernel at the next open, which would read it short
// while stat says the full size: the open is served from userspace, which
// fetches the lost block again.
func TestShortCacheFileNotPassedThrough(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := lostFiles()
	put(t, srv.writer(t, bucket), files)
	small := files["rd/small"]
	addr := metricsAddr(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--passthrough", "on", "--metrics-addr", addr)
	p := filepath.Join(m.dir, "rd/small")
	readWhole(t, p, small)
	waitWritten(t, addr, int64(len(small)))
	counts := func() (pt, us, gets float64) {
		f := scrape(t, addr)
		return metric(f, "strata_fs_passthrough_opens_total", nil), metric(f, "strata_fs_userspace_opens_total", nil),
			metric(f, "strata_prefetch_fetches_total", nil)
	}
	pt0, us0, _ := counts()
	readWhole(t, p, small)
	if pt1, us1, _ := counts(); pt1-pt0 != 1 || us1 != us0 {
		t.Fatalf("the fully cached file was not opened through passthrough (+%v passthrough, +%v userspace opens)", pt1-pt0, us1-us0)
	}

	if err := os.Truncate(cacheFileOfSize(t, m.cacheDir, int64(len(small))), 1000); err != nil {
		t.Fatal(err)
	}
	dropCaches(t)
	pt0, us0, gets0 := counts()
	readWhole(t, p, small)
	pt1, us1, gets1 := counts()
	if pt1 != pt0 || us1-us0 != 1 || gets1 == gets0 {
		t.Errorf("open after the cache file was cut short: +%v passthrough, +%v userspace opens, +%v GETs; want one userspace open that fetches", pt1-pt0, us1-us0, gets1-gets0)
	}
	if log := logTail(m.cacheDir); !strings.Contains(log, "fetched again") {
		t.Errorf("the log does not say the cache file's blocks are fetched again:\n%s", log)
	}
}
