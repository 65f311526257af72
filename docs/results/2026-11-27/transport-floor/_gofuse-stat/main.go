// Command gofuse-stat mounts one empty file, f, with entry and attribute
// timeouts 0: every stat of it is a LOOKUP and a GETATTR, answered from
// memory. It measures go-fuse's round trip beside libfuse-stat.c.
package main

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

type root struct{ fs.Inode }

func (r *root) OnAdd(ctx context.Context) {
	f := r.NewPersistentInode(ctx, &fs.MemRegularFile{Attr: fuse.Attr{Mode: 0o644}}, fs.StableAttr{Ino: 2})
	r.AddChild("f", f, false)
}

func (r *root) Getattr(context.Context, fs.FileHandle, *fuse.AttrOut) syscall.Errno { return 0 }

func main() {
	var zero time.Duration
	opts := &fs.Options{EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero}
	opts.DirectMount = true
	srv, err := fs.Mount(os.Args[1], &root{}, opts)
	if err != nil {
		panic(err)
	}
	srv.Wait()
}
