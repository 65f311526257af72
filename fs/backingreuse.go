package fs

import (
	"container/list"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits of the idle backing registrations a mount keeps.
const (
	// idleBackingFiles is the most kept (and at most a quarter of the
	// process's descriptor limit: each holds a descriptor): an epoch over
	// thousands of small files reopens every one of them.
	idleBackingFiles = 16384
	idleBackingSize  = 8 << 20 // larger files are released at once: their reads dwarf two ioctls
	// idleBackingSweep is how often idle registrations are checked for
	// files the cache has removed since (evicted): those are released,
	// so the blocks they hold on disk are freed within about this long.
	idleBackingSweep = 5 * time.Second
	// idleBackingAge bounds how long an unused registration is kept.
	idleBackingAge = 10 * time.Minute
)

// reusedBacking keeps the kernel's registration of a cache file after its
// last open is released, so that the next open of the same file (the
// next epoch over a dataset of small files) hands the kernel the id it
// has instead of registering the file again: two ioctls per open saved,
// and for a sidecar two round trips to the CSI plugin. go-fuse registers
// at the first open of an inode and unregisters at its last release; this
// sits behind it.
//
// A registration holds a duplicate of the file's descriptor, so the
// inode cannot be freed and its number reused while the entry lives: a
// hit on (device, inode) is always the same file. A cache file evicted
// while registered keeps its blocks until the entry goes: a sweep every
// idleBackingSweep releases the idle registrations of files no longer
// linked in the cache directory, so that lasts seconds, not the entry's
// whole life.
type reusedBacking struct {
	inner    Backing
	now      func() time.Time
	maxFiles int

	mu    sync.Mutex // guards below; never held across a syscall
	byKey map[fileKey]*registration
	byID  map[int32]*registration
	idle  *list.List    // of *registration with refs == 0, oldest first
	stop  chan struct{} // closed by Close: ends the sweeper
}

type fileKey struct{ dev, ino uint64 }

type registration struct {
	key  fileKey
	id   int32
	fd   int // our duplicate
	size int64
	refs int
	elem *list.Element // in idle, when refs == 0
	at   time.Time     // when it went idle
}

func newReusedBacking(inner Backing) *reusedBacking {
	return newReusedBackingEvery(inner, idleBackingSweep)
}

// newReusedBackingEvery sweeps every interval (tests sweep faster).
func newReusedBackingEvery(inner Backing, interval time.Duration) *reusedBacking {
	maxFiles := idleBackingFiles
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/4 < uint64(maxFiles) {
		maxFiles = int(lim.Cur / 4)
	}
	r := &reusedBacking{inner: inner, now: time.Now, maxFiles: maxFiles, byKey: map[fileKey]*registration{},
		byID: map[int32]*registration{}, idle: list.New(), stop: make(chan struct{})}
	go r.sweeper(interval)
	return r
}

// sweeper sweeps every interval until Close, so an evicted file's blocks
// are freed within seconds even when no file is opened meanwhile.
func (r *reusedBacking) sweeper(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.sweep()
		}
	}
}

func (r *reusedBacking) Register(fd int) (int32, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return r.inner.Register(fd)
	}
	key := fileKey{st.Dev, st.Ino}
	r.mu.Lock()
	expired := r.expireLocked()
	reg := r.byKey[key]
	if reg != nil {
		if reg.elem != nil {
			r.idle.Remove(reg.elem)
			reg.elem = nil
		}
		reg.refs++
	}
	r.mu.Unlock()
	_ = r.release(expired...) // aged out: nobody waits on their release
	if reg != nil {
		return reg.id, 0
	}

	id, errno := r.inner.Register(fd)
	if errno != 0 {
		return id, errno
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return id, 0 // not kept: Unregister passes it through
	}
	reg = &registration{key: key, id: id, fd: dup, size: st.Size, refs: 1}
	r.mu.Lock()
	if other := r.byKey[key]; other != nil { // a concurrent first open won
		other.refs++
		r.mu.Unlock()
		_ = r.release(reg) // ours was a duplicate; the kernel keeps the winner's
		return other.id, 0
	}
	r.byKey[key], r.byID[id] = reg, reg
	r.mu.Unlock()
	return id, 0
}

func (r *reusedBacking) Unregister(id int32) syscall.Errno {
	r.mu.Lock()
	reg := r.byID[id]
	if reg == nil {
		r.mu.Unlock()
		return r.inner.Unregister(id)
	}
	reg.refs--
	if reg.refs > 0 {
		r.mu.Unlock()
		return 0
	}
	if reg.size == 0 {
		// A file written by passthrough is registered empty and grows:
		// its size now (cache files never change: no syscall for them).
		r.mu.Unlock()
		var st unix.Stat_t
		err := unix.Fstat(reg.fd, &st)
		r.mu.Lock()
		if err == nil {
			reg.size = st.Size
		}
		if reg.refs > 0 || r.byID[id] != reg { // opened again (or dropped) meanwhile
			r.mu.Unlock()
			return 0
		}
	}
	if reg.size > idleBackingSize {
		r.dropLocked(reg)
		r.mu.Unlock()
		return r.release(reg)
	}
	reg.at = r.now()
	reg.elem = r.idle.PushBack(reg)
	expired := r.expireLocked()
	r.mu.Unlock()
	_ = r.release(expired...) // aged out: not the caller's registration
	return 0
}

// sweep releases the idle registrations whose cache file has been
// removed (evicted, or replaced by a newer version) since.
func (r *reusedBacking) sweep() {
	r.mu.Lock()
	idle := make([]*registration, 0, r.idle.Len())
	for e := r.idle.Front(); e != nil; e = e.Next() {
		idle = append(idle, e.Value.(*registration))
	}
	r.mu.Unlock()
	var gone []*registration
	for _, reg := range idle {
		var st unix.Stat_t
		// reg.fd is ours until the registration is dropped, which only
		// happens under mu with the entry out of the maps (checked below).
		if err := unix.Fstat(reg.fd, &st); err == nil && st.Nlink > 0 {
			continue
		}
		gone = append(gone, reg)
	}
	if len(gone) == 0 {
		return
	}
	r.mu.Lock()
	var drop []*registration
	for _, reg := range gone {
		if reg.elem == nil || r.byID[reg.id] != reg { // reopened or dropped meanwhile
			continue
		}
		r.idle.Remove(reg.elem)
		reg.elem = nil
		r.dropLocked(reg)
		drop = append(drop, reg)
	}
	r.mu.Unlock()
	_ = r.release(drop...) // nobody waits on these
}

// expireLocked takes out the idle registrations beyond the limits, the
// oldest first, and those idle for longer than idleBackingAge; the
// caller releases them once it has let go of the lock.
func (r *reusedBacking) expireLocked() []*registration {
	var out []*registration
	now := r.now()
	for e := r.idle.Front(); e != nil; e = r.idle.Front() {
		reg := e.Value.(*registration)
		if r.idle.Len() <= r.maxFiles && now.Sub(reg.at) < idleBackingAge {
			break
		}
		r.idle.Remove(e)
		reg.elem = nil
		r.dropLocked(reg)
		out = append(out, reg)
	}
	return out
}

func (r *reusedBacking) dropLocked(reg *registration) {
	delete(r.byKey, reg.key)
	delete(r.byID, reg.id)
}

// release closes our duplicates and unregisters regs; it returns the
// first error.
func (r *reusedBacking) release(regs ...*registration) syscall.Errno {
	var first syscall.Errno
	for _, reg := range regs {
		unix.Close(reg.fd)
		if errno := r.inner.Unregister(reg.id); errno != 0 && first == 0 {
			first = errno
		}
	}
	return first
}

// keep registers fd's file as an open would, and leaves the registration
// idle, kept as after a last release: the file's first open then finds
// it. It reports whether it is kept.
func (r *reusedBacking) keep(fd int) bool {
	select {
	case <-r.stop:
		return false // closed: nothing may be left behind
	default:
	}
	id, errno := r.Register(fd)
	if errno != 0 {
		return false
	}
	r.mu.Lock()
	kept := r.byID[id] != nil
	r.mu.Unlock()
	return r.Unregister(id) == 0 && kept
}

// Close releases every idle registration (at unmount the kernel drops
// them with the connection anyway; this returns our descriptors).
func (r *reusedBacking) Close() {
	r.mu.Lock()
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	var all []*registration
	for e := r.idle.Front(); e != nil; e = r.idle.Front() {
		reg := e.Value.(*registration)
		r.idle.Remove(e)
		r.dropLocked(reg)
		all = append(all, reg)
	}
	r.mu.Unlock()
	_ = r.release(all...) // the connection is going away with them
}
