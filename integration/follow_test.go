package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestTailFollowsAppends: `tail -f metrics.csv` started while no writer
// has the file open (a fully cached file: the kernel reads it through
// passthrough), then the job appends a line at a time, each its own open,
// append and close (a CSV logger, `echo ... >> log`). tail must print
// every line, as on a local disk. It used to print none: the kernel read
// tail's cache file, the version it opened, which ends where that version
// did, while the appends went to the write session. Once tail is gone the
// file reads as written, and the bucket holds every line.
func TestTailFollowsAppends(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			first := []byte("epoch,loss\n0,1.000\n")
			c := mountCachedFile(t, srv, "metrics.csv", first, "--upload", mode)
			ptOpens := func() float64 { return metric(scrape(t, c.addr), "strata_fs_passthrough_opens_total", nil) }
			before := ptOpens()

			tail := exec.Command("tail", "-n", "+1", "-f", "-s", "0.1", c.p)
			out, err := tail.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := tail.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tail.Process.Kill(); _ = tail.Wait() }()
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			next := func(what string) string {
				t.Helper()
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("%s: tail exited", what)
					}
					return l
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: tail printed nothing in 10 s", what)
				}
				return ""
			}
			for _, want := range strings.Split(strings.TrimSuffix(string(first), "\n"), "\n") {
				if got := next("the file as tail opened it"); got != want {
					t.Fatalf("tail printed %q, want %q", got, want)
				}
			}
			if d := ptOpens() - before; d != 1 {
				t.Fatalf("tail's open of a fully cached file: passthrough opens +%v, want +1", d)
			}

			want := first
			for i := 1; i <= 5; i++ {
				line := fmt.Sprintf("%d,%.3f", i, 1/float64(i+1))
				f, err := os.OpenFile(c.p, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatalf("append %d beside tail: %v", i, err)
				}
				if _, err := f.WriteString(line + "\n"); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatalf("close of append %d: %v", i, err)
				}
				want = append(want, line+"\n"...)
				if got := next(fmt.Sprintf("after append %d", i)); got != line {
					t.Fatalf("after append %d tail printed %q, want %q", i, got, line)
				}
			}
			readWhole(t, c.p, want)

			_ = tail.Process.Kill()
			_ = tail.Wait()
			runSync(t, c.m)
			if got, n, err := bucketSHA(t, c.w, "metrics.csv"); err != nil || got != sha(want) {
				t.Fatalf("the bucket holds %d bytes, want the %d written: %v", n, len(want), err)
			}
			// tail's RELEASE reaches the daemon a moment after it exits;
			// every read from here on, passthrough or not, reads the file
			// as written.
			readsAcrossReleases(t, c.p, want)
			if log := logTail(c.m.cacheDir); bytes.Contains([]byte(log), []byte("memory mapping")) {
				t.Errorf("the log warns of a memory mapping nobody made:\n%s", log)
			}
		})
	}
}

// TestFollowStopsAtARewrite: a reader opened through passthrough sees the
// bytes appended past the version it opened (TestTailFollowsAppends), but
// never a mix: once a writer truncates the file, what it writes after is
// not shown to that reader, which keeps the version it opened. Once the
// reader is gone, the file reads as written, from the cache file too.
func TestFollowStopsAtARewrite(t *testing.T) {
	requireFUSE(t)
	old := randData(511, 1<<20+13)
	c := mountCachedFile(t, startMinIO(t), "run.log", old)
	reader, err := os.Open(c.p)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	f, err := os.OpenFile(c.p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("appended\n"), int64(len(old))); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1000); err != nil {
		t.Fatal(err)
	}
	// Only past the old version's end: the truncation alone must end
	// what the reader is shown.
	far := int64(len(old)) + 100
	long := append(bytes.Repeat([]byte("x"), 1<<20), '\n')
	if _, err := f.WriteAt(long, far); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, far+int64(len(long)))
	copy(want, old[:1000])
	copy(want[far:], long)
	got, err := io.ReadAll(reader)
	if err != nil {
		t.Fatal(err)
	}
	seen := append(append([]byte{}, old...), "appended\n"...)
	if !bytes.Equal(got, seen) {
		t.Fatalf("the reader opened before read %d bytes: want the %d of its version and the append made before the truncation, nothing written after it", len(got), len(seen))
	}
	readWhole(t, c.p, want)
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}
	runSync(t, c.m)
	if sum, n, err := bucketSHA(t, c.w, "run.log"); err != nil || sum != sha(want) {
		t.Fatalf("the bucket holds %d bytes, want the %d written: %v", n, len(want), err)
	}
	readsAcrossReleases(t, c.p, want)
}
