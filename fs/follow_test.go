package fs

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAppendsBesideAPassthroughReaderAreFollowed: appends made while a
// passthrough reader holds the file are also written to the reader's
// cache file, past the version it holds (the kernel reads that file for
// it: `tail -f`); a write within that version ends it; the end of the
// shadow, which may race a write, cuts the cache file back to the
// version's size. Run with -race: the writes, the release and the cut
// back share the node's write state.
func TestAppendsBesideAPassthroughReaderAreFollowed(t *testing.T) {
	ctx := context.Background()
	old := "epoch,loss\n"
	n, reader := withPassthroughReader(t, "metrics.csv", old)
	wh, _, errno := n.Open(ctx, syscall.O_WRONLY|syscall.O_APPEND)
	if errno != 0 {
		t.Fatalf("open for appending beside a passthrough reader: %v", errno)
	}
	writer, ok := wh.(*shadowHandle)
	if !ok {
		t.Fatalf("the writer's handle is a %T, want a shadowHandle", wh)
	}
	n.mu.Lock()
	obj := n.peekWS().shadowObj
	if obj != nil {
		obj = obj.Clone()
	}
	n.mu.Unlock()
	if obj == nil {
		t.Fatal("the shadow holds no reference to the reader's cache file")
	}
	defer obj.Release()
	fd, err := obj.Fd()
	if err != nil {
		t.Fatal(err)
	}
	cached := func(off int64, k int) string {
		t.Helper()
		buf := make([]byte, k)
		m, _ := unix.Pread(fd, buf, off)
		return string(buf[:m])
	}

	// Two appenders at once, each its own offset past the old end.
	end := int64(len(old))
	lines := []string{"1,0.50\n", "2,0.33\n"}
	var wg sync.WaitGroup
	for i, l := range lines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, errno := writer.Write(ctx, []byte(l), end+int64(i*len(l))); errno != 0 {
				t.Errorf("append: %v", errno)
			}
		}()
	}
	wg.Wait()
	if got, want := cached(end, 14), lines[0]+lines[1]; got != want {
		t.Fatalf("the reader's cache file holds %q past the old end, want the appends %q", got, want)
	}

	// A write within the old version ends following: what comes after
	// is not shown to the reader.
	if _, errno := writer.Write(ctx, []byte("E"), 0); errno != 0 {
		t.Fatal(errno)
	}
	if _, errno := writer.Write(ctx, []byte("3,0.25\n"), end+14); errno != 0 {
		t.Fatal(errno)
	}
	if got := cached(0, 1); got != "e" {
		t.Fatalf("a write within the version reached the reader's cache file: %q", got)
	}
	if got := cached(end+14, 7); got != "" {
		t.Fatalf("an append after a rewrite reached the reader's cache file: %q", got)
	}

	// The reader goes while another append is on its way.
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = writer.Write(ctx, []byte("4,0.20\n"), end+21)
	}()
	n.release(reader)
	wg.Wait()
	if errno := writer.Flush(ctx); errno != 0 {
		t.Fatalf("close: %v", errno)
	}
	_ = writer.Release(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		if st.Size == end {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the reader went its cache file is %d bytes, want it cut back to the version's %d", st.Size, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
