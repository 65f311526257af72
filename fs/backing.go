package fs

import (
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache"
)

// canPassThrough reports whether obj's cache file may be handed to the
// kernel: every block cached, in a file that still holds them, and
// verified in this run (or trusted from a clean shutdown). Objects up to
// VerifyOnOpen are verified here, the others as userspace reads them.
func (f *FS) canPassThrough(n *fileNode, obj *cache.Object) bool {
	if !f.passthrough.Load() || !obj.Complete() {
		return false
	}
	// The kernel reads a passed-through file without asking: a cache file
	// cut short behind our back would read short while stat says the full
	// size. An fstat finds it; the blocks it lost are dropped and the open
	// is served from userspace, which fetches them again.
	if err := obj.CheckFile(); err != nil {
		f.log.Warn("fs: checking the cache file", "key", n.key.get(), "err", err)
	}
	if !obj.Complete() {
		return false
	}
	if !obj.Verified() && obj.Size() <= f.opts.VerifyOnOpen {
		if _, err := obj.Verify(); err != nil {
			f.log.Warn("fs: verifying cached file", "key", n.key.get(), "err", err)
		}
	}
	return obj.Verified()
}

// Backing registers cache files with the kernel as FUSE passthrough
// backing files (the FUSE_DEV_IOC_BACKING_OPEN and _CLOSE ioctls on the
// connection's /dev/fuse descriptor). The kernel allows those ioctls only
// to CAP_SYS_ADMIN in the initial user namespace, which an unprivileged
// daemon lacks: a Kubernetes sidecar mounts with a Backing that asks the
// privileged CSI node plugin to register its files (internal/csi). With
// no Backing, the daemon registers them itself.
type Backing interface {
	// Register returns the kernel's backing id for the open file fd.
	Register(fd int) (int32, syscall.Errno)
	// Unregister releases an id Register returned.
	Unregister(id int32) syscall.Errno
}

// kernelCalls is what go-fuse's node bridge calls into the kernel
// through: the notifications go to the FUSE server as usual, backing
// registration goes to a Backing. go-fuse looks the registration methods
// up on this value, so it is the one place where a handle's backing file
// can be registered by someone other than the server's own descriptor.
type kernelCalls struct {
	srv     atomic.Pointer[fuse.Server]
	backing Backing
	holds   *backingHolds
}

func (k *kernelCalls) server() *fuse.Server { return k.srv.Load() }

func (k *kernelCalls) DeleteNotify(parent, child uint64, name string) fuse.Status {
	if s := k.server(); s != nil {
		return s.DeleteNotify(parent, child, name)
	}
	return fuse.ENOSYS
}

func (k *kernelCalls) EntryNotify(parent uint64, name string) fuse.Status {
	if s := k.server(); s != nil {
		return s.EntryNotify(parent, name)
	}
	return fuse.ENOSYS
}

func (k *kernelCalls) InodeNotify(node uint64, off, length int64) fuse.Status {
	if s := k.server(); s != nil {
		return s.InodeNotify(node, off, length)
	}
	return fuse.ENOSYS
}

func (k *kernelCalls) InodeRetrieveCache(node uint64, offset int64, dest []byte) (int, fuse.Status) {
	if s := k.server(); s != nil {
		return s.InodeRetrieveCache(node, offset, dest)
	}
	return 0, fuse.ENOSYS
}

func (k *kernelCalls) InodeNotifyStoreCache(node uint64, offset int64, data []byte) fuse.Status {
	if s := k.server(); s != nil {
		return s.InodeNotifyStoreCache(node, offset, data)
	}
	return fuse.ENOSYS
}

// RegisterBackingFd and UnregisterBackingFd are the methods go-fuse's
// bridge looks for (an unexported interface in go-fuse/fs).
// Both tell holds which node the registration is for.
func (k *kernelCalls) RegisterBackingFd(m *fuse.BackingMap) (int32, syscall.Errno) {
	id, errno := k.backing.Register(int(m.Fd))
	k.holds.registered(id, errno == 0)
	return id, errno
}

func (k *kernelCalls) UnregisterBackingFd(id int32) syscall.Errno {
	k.holds.unregistered(id)
	return k.backing.Unregister(id)
}

// rootStableAttr gives the root inode number 1 (FUSE's root node id), as
// a directory tree's root has one; go-fuse's default is 0, which stat(2)
// shows and tools that tell files apart by (device, inode) take for "no
// inode number".
func rootStableAttr() *gofs.StableAttr { return &gofs.StableAttr{Ino: fuse.FUSE_ROOT_ID} }

// withKernelCalls wraps the node bridge so that go-fuse's Init, which
// would make the bridge call the server directly, only tells kernelCalls
// which server to notify.
type withKernelCalls struct {
	fuse.RawFileSystem
	calls *kernelCalls
}

func (w *withKernelCalls) Init(s *fuse.Server) { w.calls.srv.Store(s) }

// mountServer mounts root like gofs.Mount, with backing files registered
// through b, or on the server's own descriptor when b is nil, either way
// behind a reusedBacking, and recorded in holds. It returns the server
// and what registers.
func mountServer(mountpoint string, root gofs.InodeEmbedder, opts *gofs.Options, b Backing, holds *backingHolds) (*fuse.Server, *reusedBacking, error) {
	calls := &kernelCalls{holds: holds}
	opts.ServerCallbacks = calls
	opts.RootStableAttr = rootStableAttr()
	raw := &withKernelCalls{RawFileSystem: gofs.NewNodeFS(root, opts), calls: calls}
	srv, err := fuse.NewServer(raw, mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, nil, err
	}
	if b == nil {
		b = serverBacking{srv}
	}
	reuse := newReusedBacking(b)
	calls.backing = reuse // before Serve: no request has been read yet
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		reuse.Close() // nothing registered yet: ends its sweeper
		return nil, nil, err
	}
	return srv, reuse, nil
}

// serverBacking registers on the server's own descriptor.
type serverBacking struct{ srv *fuse.Server }

func (s serverBacking) Register(fd int) (int32, syscall.Errno) {
	return s.srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
}

func (s serverBacking) Unregister(id int32) syscall.Errno { return s.srv.UnregisterBackingFd(id) }
