package fs

import (
	"context"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestWriterBesideAPassthroughReaderNamesItsBacking: the kernel keeps a
// passthrough reader's backing file as the inode's, and accepts only
// opens that name it. A writer's open then, and every open after it
// until that reader goes, is a shadowHandle (FOPEN_DIRECT_IO: reads and
// writes come to the daemon; go-fuse names the backing file), served the
// file's new content; once the last of them is released, opens are
// decided afresh. It used to fail with EBUSY.
func TestWriterBesideAPassthroughReaderNamesItsBacking(t *testing.T) {
	ctx := context.Background()
	n, reader := withPassthroughReader(t, "ckpt.pt", "old content") // an evaluator

	wh, flags, errno := n.Open(ctx, syscall.O_WRONLY|syscall.O_TRUNC)
	if errno != 0 {
		t.Fatalf("open for writing beside a passthrough reader: %v, want success", errno)
	}
	writer, ok := wh.(*shadowHandle)
	if !ok || flags&fuse.FOPEN_DIRECT_IO == 0 {
		t.Fatalf("the writer's handle is a %T with flags %#x; want a shadowHandle with FOPEN_DIRECT_IO", wh, flags)
	}
	if _, errno := writer.Write(ctx, []byte("new"), 0); errno != 0 {
		t.Fatalf("write: %v", errno)
	}

	rh, flags, errno := n.Open(ctx, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open for reading while shadowed: %v", errno)
	}
	r2, ok := rh.(*shadowHandle)
	if !ok || flags&fuse.FOPEN_DIRECT_IO == 0 {
		t.Fatalf("a read open while shadowed is a %T with flags %#x; want a shadowHandle with FOPEN_DIRECT_IO", rh, flags)
	}
	buf := make([]byte, 64)
	res, errno := r2.Read(ctx, buf, 0)
	if errno != 0 {
		t.Fatalf("read: %v", errno)
	}
	if b, _ := res.Bytes(buf); string(b) != "new" {
		t.Fatalf("a new open reads %q; want the writer's %q", b, "new")
	}

	if errno := writer.Flush(ctx); errno != 0 {
		t.Fatalf("close: %v", errno)
	}
	_ = writer.Release(ctx)
	_ = r2.Release(ctx)
	n.mu.Lock()
	still := n.peekWS().isShadowed()
	n.mu.Unlock()
	if !still {
		t.Fatal("the shadow ended while the passthrough reader is still open")
	}
	n.release(reader)
	n.mu.Lock()
	still, pt, us := n.peekWS().isShadowed(), n.ptOpen, n.usOpen
	n.mu.Unlock()
	if still || pt != 0 || us != 0 {
		t.Fatalf("after every handle went: shadowed %v, %d passthrough and %d userspace handles counted", still, pt, us)
	}
	h, _, errno := n.Open(ctx, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	if _, ok := h.(*shadowHandle); ok {
		t.Fatal("an open after the shadow ended is still a shadowHandle")
	}
	_ = h.(gofs.FileReleaser).Release(ctx)
}

// TestTruncateBesideAPassthroughReaderIsShadowed: a truncation by path (a
// SETATTR with no handle) while a passthrough reader is open changes the
// content the reader's backing file held: the opens after it are
// shadowHandles, served the truncated file, not passthrough handles the
// kernel would serve from that backing file.
func TestTruncateBesideAPassthroughReaderIsShadowed(t *testing.T) {
	ctx := context.Background()
	n, reader := withPassthroughReader(t, "run.log", "line one\nline two\n")
	defer n.release(reader)

	in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE, Size: 9}}
	if errno := n.Setattr(ctx, nil, in, &fuse.AttrOut{}); errno != 0 {
		t.Fatalf("truncate: %v", errno)
	}
	h, flags, errno := n.Open(ctx, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer func() { _ = h.(gofs.FileReleaser).Release(ctx) }()
	sh, ok := h.(*shadowHandle)
	if !ok || flags&fuse.FOPEN_DIRECT_IO == 0 {
		t.Fatalf("an open after a truncation beside a passthrough reader is a %T with flags %#x; want a shadowHandle with FOPEN_DIRECT_IO", h, flags)
	}
	buf := make([]byte, 64)
	res, errno := sh.Read(ctx, buf, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if b, _ := res.Bytes(buf); string(b) != "line one\n" {
		t.Fatalf("read %q after the truncation, want %q", b, "line one\n")
	}
}

// withPassthroughReader makes a mount holding name = content and counts
// a handle open on it through passthrough, as a reader's open of a fully
// cached file does; the caller releases it.
func withPassthroughReader(t *testing.T, name, content string) (*fileNode, *fileHandle) {
	t.Helper()
	f := newTestFS(t, map[string]string{name: content})
	if _, errno := f.lookup(name); errno != 0 {
		t.Fatalf("lookup: %v", errno)
	}
	n := f.fsys.Root().EmbeddedInode().GetChild(name).Operations().(*fileNode)
	reader := &fileHandle{n: n, pt: true}
	n.mu.Lock()
	n.ptOpen++
	n.mu.Unlock()
	return n, reader
}
