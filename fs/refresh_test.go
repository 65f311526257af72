package fs

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache/meta"
)

// Refresh shows a path as the bucket has it now, inside the metadata TTL:
// a changed file gets its new version (a new inode), a deleted one goes, a
// directory is listed again, and "" does all of it for the whole mount.
func TestRefresh(t *testing.T) {
	ctx := context.Background()
	f := newTestFS(t, map[string]string{"d/x": "version one", "d/y": "y", "top": "t"})
	before, errno := f.lookup("d/x")
	if errno != 0 {
		t.Fatal(errno)
	}
	f.readdir("d") // d/'s listing is cached
	if _, errno := f.lookup("top"); errno != 0 {
		t.Fatal(errno)
	}
	f.be.set("d/x", []byte("version two, longer"))
	f.be.set("d/new", []byte("n"))
	f.be.set("top", []byte("top two"))
	if out, _ := f.lookup("d/x"); out.Attr.Size != before.Attr.Size {
		t.Fatal("the test needs the change to be unseen within the TTL")
	}
	if _, errno := f.lookup("d/new"); errno != syscall.ENOENT {
		t.Fatalf("d/new before refresh: %v (the cached listing does not have it)", errno)
	}

	res, err := f.fsys.Refresh(ctx, "d/x")
	if err != nil || res.State != "file" || res.Size != int64(len("version two, longer")) || res.Was == "" || res.Was == res.Version {
		t.Fatalf("refresh d/x: %+v %v", res, err)
	}
	after, errno := f.lookup("d/x")
	if errno != 0 || after.Attr.Size != uint64(res.Size) || after.Ino == before.Ino {
		t.Fatalf("d/x after refresh: size %d ino %d (was %d), %v", after.Attr.Size, after.Ino, before.Ino, errno)
	}

	f.be.mu.Lock()
	delete(f.be.objs, "d/y")
	f.be.mu.Unlock()
	if res, err := f.fsys.Refresh(ctx, "/d/y/"); err != nil || res.State != "gone" || res.Path != "d/y" {
		t.Fatalf("refresh of a deleted file: %+v %v", res, err)
	}
	if _, errno := f.lookup("d/y"); errno != syscall.ENOENT {
		t.Fatalf("d/y after refresh: %v", errno)
	}

	if res, err := f.fsys.Refresh(ctx, "d"); err != nil || res.State != "directory" {
		t.Fatalf("refresh d: %+v %v", res, err)
	}
	if got := f.readdir("d"); !slices.Equal(got, []string{"new", "x"}) && !slices.Equal(got, []string{"x", "new"}) {
		t.Fatalf("d after refresh: %v", got)
	}

	if out, _ := f.lookup("top"); out.Attr.Size != 1 {
		t.Fatal("top changed before the whole-mount refresh")
	}
	if res, err := f.fsys.Refresh(ctx, ""); err != nil || res.State != "all" {
		t.Fatalf("refresh everything: %+v %v", res, err)
	}
	if out, _ := f.lookup("top"); out.Attr.Size != uint64(len("top two")) {
		t.Fatalf("top after refreshing everything: size %d", out.Attr.Size)
	}
}

// TestRefreshAfterTheKernelForgot: the kernel may drop the inode of a
// changed file (its dentries dropped, memory pressure) before the user
// refreshes it; the refresh still says which version it replaces.
func TestRefreshAfterTheKernelForgot(t *testing.T) {
	f := newTestFS(t, map[string]string{"d/x": "version one"})
	out, errno := f.lookup("d/x")
	if errno != 0 {
		t.Fatal(errno)
	}
	f.raw.Forget(out.NodeId, 1)
	f.be.set("d/x", []byte("version two"))
	res, err := f.fsys.Refresh(context.Background(), "d/x")
	if err != nil || res.Was == "" || res.Was == res.Version {
		t.Fatalf("refresh of a changed file the kernel forgot: %+v %v (want the version it replaces)", res, err)
	}
}

// The log line of a read that fails with ESTALE says how to get out.
func TestStaleHint(t *testing.T) {
	f := newTestFSWith(t, nil, func(o *Options) { o.TTL = meta.Indefinite })
	mp := "/mnt/my data"
	f.fsys.mountpoint.Store(&mp)
	if h := f.fsys.staleHint("dir/x.bin"); !strings.Contains(h, "indefinite") || !strings.Contains(h, "`strata refresh '/mnt/my data' dir/x.bin`") {
		t.Errorf("hint under an indefinite TTL: %q", h)
	}
	g := newTestFS(t, nil)
	if h := g.fsys.staleHint("x"); !strings.Contains(h, "1m0s") || !strings.Contains(h, "strata refresh MOUNTPOINT x") {
		t.Errorf("hint under a 1 minute TTL: %q", h)
	}
}

// TestRefreshOfAFileWrittenHere: `strata refresh` of a file this mount
// wrote, once its upload is complete, reports it unchanged. It said
// "written here and not uploaded yet" (the node was still tracked by key)
// or "changed in the bucket ... reopen it" (the node's entry still named
// the version before its own upload), sending users to look for a writer
// that did not exist.
func TestRefreshOfAFileWrittenHere(t *testing.T) {
	ctx := context.Background()
	f := newTestFS(t, map[string]string{"ckpt": "epoch 1"})
	e, errno := f.lookup("ckpt")
	if errno != 0 {
		t.Fatal(errno)
	}
	in := fuse.InHeader{NodeId: e.NodeId}
	fh := f.open(e.NodeId, syscall.O_WRONLY|syscall.O_TRUNC)
	if _, s := f.raw.Write(nil, &fuse.WriteIn{InHeader: in, Fh: fh}, []byte("epoch 2")); s != fuse.OK {
		t.Fatalf("write: %v", s)
	}
	if s := f.raw.Flush(nil, &fuse.FlushIn{InHeader: in, Fh: fh}); s != fuse.OK {
		t.Fatalf("flush: %v", s)
	}
	f.release(e.NodeId, fh)
	if _, err := f.fsys.wb.WaitAll(ctx); err != nil { // strata sync
		t.Fatal(err)
	}
	if got, _ := f.be.get("ckpt"); got != "epoch 2" {
		t.Fatalf("the bucket holds %q after the close", got)
	}
	res, err := f.fsys.Refresh(ctx, "ckpt")
	if err != nil || res.State != "file" || res.Was != res.Version {
		t.Errorf("refresh of the uploaded file: %+v %v; want state file, unchanged (was = version)", res, err)
	}
}
