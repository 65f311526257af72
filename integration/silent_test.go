package integration

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// silentBound is README's bound for a transfer already under way when the
// network goes silent: its 30 s stall timeout, then the 10 s an uncached
// read gets (a new GET has 8 s to be answered, retries included).
const silentBound = 30*time.Second + eioBound

// TestTransferGoesSilent: the network goes silent (toxiproxy holds every
// byte, connections stay open) while a cold file is being read, a big one
// sequentially and a small one fetched whole at its open. The reader gets
// EIO within silentBound of the silence, never wrong bytes; once the
// network is back the same files read whole and right, and again after a
// remount on the same cache dir (no block of the broken transfer was kept
// half-written). Before the fix the S3 backend resumed the body (stalled,
// or closed by the far side after 30 s of silence) with a new GET that
// waited out every SDK attempt (about 20 s), and the fetcher then sent one
// more with its own 8 s: EIO came 59 s after the silence.
func TestTransferGoesSilent(t *testing.T) {
	requireFUSE(t)
	t.Parallel() // waits out stall timeouts
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := map[string][]byte{"big.bin": randData(71, 48<<20), "small.bin": randData(72, 2<<20+1234)}
	put(t, srv.writer(t, bucket), files)
	tp := startToxiproxy(t)
	for _, tc := range []struct {
		name string
		rate int64 // KB/s: slow enough that the silence comes mid-transfer
		// silent is how far the reader gets before the silence (0: a
		// fixed time after the first read started, for a file whose first
		// block needs the whole transfer).
		silent int
	}{
		{"big.bin", 4000, 6 << 20},
		{"small.bin", 200, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proxy := "silent-" + tc.name
			addr := tp.proxy(t, proxy, srv.m.Addr)
			cacheDir := t.TempDir()
			m := startMount(t, srv, srv.source(bucket, ""), cacheDir, endpointOf(addr)...)
			p := filepath.Join(m.dir, tc.name)
			if _, err := os.Stat(p); err != nil {
				t.Fatal(err)
			}
			tp.toxic(t, proxy, "slow", "bandwidth", "downstream", 1, map[string]int64{"rate": tc.rate})
			// goSilent may run on a timer's goroutine (the small file's
			// read blocks until the silence): it hands the time over on a
			// channel, and only this goroutine reads it.
			silenced := make(chan time.Time, 1)
			var silence time.Time
			goSilent := func() {
				tp.toxic(t, proxy, "hole-up", "timeout", "upstream", 1, map[string]int64{"timeout": 0})
				tp.toxic(t, proxy, "hole-down", "timeout", "downstream", 1, map[string]int64{"timeout": 0})
				silenced <- time.Now()
			}
			if tc.silent == 0 {
				timer := time.AfterFunc(2*time.Second, goSilent)
				defer timer.Stop()
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			buf := make([]byte, 1<<20)
			for {
				n, err := f.Read(buf)
				got = append(got, buf[:n]...)
				if tc.silent > 0 && silence.IsZero() && len(got) >= tc.silent {
					goSilent()
					silence = <-silenced
				}
				if err == io.EOF {
					t.Fatalf("the whole file was read before the network went silent: slow it down")
				}
				if err != nil {
					if silence.IsZero() {
						select {
						case silence = <-silenced:
						case <-time.After(10 * time.Second):
							t.Fatalf("the read failed before the network went silent: %v", err)
						}
					}
					took := time.Since(silence)
					if !errors.Is(err, syscall.EIO) || took > silentBound {
						t.Errorf("read with the network silent: %v after %v (want EIO within %v)", err, took.Round(time.Millisecond), silentBound)
					}
					t.Logf("EIO %v after the network went silent, %d bytes read", took.Round(time.Millisecond), len(got))
					break
				}
			}
			f.Close()
			if !bytes.Equal(got, files[tc.name][:len(got)]) {
				t.Errorf("the bytes read before the error are wrong")
			}
			tp.removeToxic(t, proxy, "hole-up")
			tp.removeToxic(t, proxy, "hole-down")
			tp.removeToxic(t, proxy, "slow")
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
				b, err := os.ReadFile(p)
				if err == nil {
					if sha(b) != sha(files[tc.name]) {
						t.Fatalf("%s after the network came back: wrong bytes", tc.name)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s 20 s after the network came back: %v", tc.name, err)
				}
			}
			m.unmount()
			m = startMount(t, srv, srv.source(bucket, ""), cacheDir, endpointOf(addr)...)
			if b, err := os.ReadFile(filepath.Join(m.dir, tc.name)); err != nil || sha(b) != sha(files[tc.name]) {
				t.Fatalf("%s after a remount on the same cache: %v (right bytes: %v)", tc.name, err, err == nil && sha(b) == sha(files[tc.name]))
			}
		})
	}
}

// TestOutageIsNotLoggedPerRead: with the endpoint gone, every read of
// uncached data fails at once (the breaker) with EIO; the log says so
// when the outage is found, not once more per read. Before the fix each
// failed read added two warnings (the fetcher's and the filesystem's):
// 104 lines for 50 reads, and a data loader retrying through an outage
// filled the log in the cache dir.
func TestOutageIsNotLoggedPerRead(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	files := map[string][]byte{"a.bin": randData(81, 3<<20)}
	put(t, srv.writer(t, bucket), files)
	tp := startToxiproxy(t)
	addr := tp.proxy(t, "outage-log", srv.m.Addr)
	m := startMount(t, srv, srv.source(bucket, ""), "", append(endpointOf(addr), "--metadata-ttl", "indefinite")...)
	p := filepath.Join(m.dir, "a.bin")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	tp.enable(t, "outage-log", false)
	if _, err := os.ReadFile(p); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with the endpoint gone: %v, want EIO", err)
	}
	warnings := func() int {
		b, _ := os.ReadFile(filepath.Join(m.cacheDir, "strata.log"))
		return bytes.Count(b, []byte(`"level":"WARN"`))
	}
	before := warnings()
	for range 50 {
		if _, err := os.ReadFile(p); !errors.Is(err, syscall.EIO) {
			t.Fatalf("read with the endpoint known gone: %v, want EIO", err)
		}
	}
	// A probe may find the endpoint still gone and a read pay for it: a
	// few lines, never one per read.
	if n := warnings() - before; n > 6 {
		t.Errorf("50 failed reads with the endpoint known gone logged %d warnings, want a few at most", n)
	}
	// The outage shows in `strata cache stats` too: before, its counters
	// (fetch errors in session.json) were never printed, and read errors
	// not even collected, so the stats of a dying mount looked healthy.
	stats, _, err := runStrata(t, srv, "cache", "stats", "--cache-dir", m.cacheDir)
	if err != nil || !strings.Contains(stats, "errors:") || !strings.Contains(stats, "reads failed") {
		t.Errorf("strata cache stats with reads failing does not say so: %v\n%s", err, stats)
	}
	tp.enable(t, "outage-log", true)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Equal(b, files["a.bin"]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a.bin 20 s after the endpoint came back: %v", err)
		}
	}
}
