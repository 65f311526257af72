package fs

import (
	"context"
	"testing"
	"time"
)

// TestWriterOpenWaitsForALateReaderRelease: `cat f; echo x >> f`. The
// reader's close returns before the daemon sees its RELEASE (the kernel
// sends it in the background), so the append's open may find the reader
// still counted open through passthrough; it waits for that RELEASE (up
// to readerReleaseWait) rather than shadow the reader's backing file
// (shadow.go; before shadows, that open failed with EBUSY). On a loaded
// machine the RELEASE comes later than a few milliseconds: here 300 ms
// (by hand on this kernel, a RELEASE late by 300 ms made the append fail
// with EBUSY, 5 of 5, when the wait was 100 ms).
func TestWriterOpenWaitsForALateReaderRelease(t *testing.T) {
	f := newTestFS(t, map[string]string{"log.txt": "hello\n"})
	if _, errno := f.lookup("log.txt"); errno != 0 {
		t.Fatalf("lookup: %v", errno)
	}
	n := f.fsys.Root().EmbeddedInode().GetChild("log.txt").Operations().(*fileNode)
	reader := &fileHandle{n: n, pt: true}
	n.mu.Lock()
	n.ptOpen++ // a passthrough reader, closed; its RELEASE is on its way
	n.mu.Unlock()
	go func() {
		time.Sleep(300 * time.Millisecond)
		n.release(reader)
	}()
	h, _, errno := n.openWrite(context.Background(), false)
	if errno != 0 {
		t.Fatalf("open for append 300 ms before the reader's RELEASE arrived: %v, want success", errno)
	}
	fh, ok := h.(*fileHandle)
	if !ok {
		t.Fatalf("the append's open is a %T, want a plain userspace handle: it did not wait for the reader's RELEASE", h)
	}
	n.release(fh)
}
