package fs

import (
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/prefetch"
)

// Options shape what the mount presents.
type Options struct {
	UID, GID uint32
	FileMode uint32 // permission bits of files
	DirMode  uint32 // permission bits of directories
	// TTL is the metadata TTL (meta.Indefinite: never expires); the kernel's
	// entry and attribute timeouts follow it.
	TTL time.Duration
	// Passthrough hands fully cached files to the kernel (when the mount
	// proved it can).
	Passthrough bool
	// VerifyOnOpen: fully cached objects up to this size whose blocks were
	// not yet checked in this run are checked at open, so that they can be
	// passed through; bigger ones are checked block by block as they are
	// read through userspace, and passed through once all are checked.
	VerifyOnOpen int64
	// Blksize is reported as st_blksize (Python sizes its buffers from it).
	Blksize uint32
	Logger  *slog.Logger
	// Observe, if set, is told of every FUSE operation served (for
	// metrics): its name, how long it took and the errno returned.
	Observe func(op string, d time.Duration, errno syscall.Errno)
	// RenameDirLimit is the most objects a directory rename copies;
	// beyond it rename returns EXDEV (mv then copies file by file).
	RenameDirLimit int
	// DirPrefetch: when readers open several uncached small files of one
	// directory, fetch its other small files in the background.
	DirPrefetch bool
	// MaxKeyLen is the longest key the bucket stores (1,024 bytes on S3
	// and GCS; 0: no limit). A create, mkdir or rename that would make a
	// longer key is refused with ENAMETOOLONG before anything is written.
	MaxKeyLen int
	// UTF8Keys: the bucket's keys are UTF-8 (S3, GCS). A name that is not
	// cannot be in it: a lookup answers ENOENT without asking, and a
	// create, mkdir or rename onto it fails with EILSEQ.
	UTF8Keys bool
	// KeyForbids lists characters a new key may not hold (GCS: "\r\n"):
	// a create, mkdir or rename onto such a name fails with EINVAL before
	// anything is written, where the upload would fail for good.
	KeyForbids string
}

// DefaultOptions: 0644 files, 0755 directories, 60 s TTL.
func DefaultOptions() Options {
	return Options{FileMode: 0o644, DirMode: 0o755, TTL: time.Minute, VerifyOnOpen: 64 << 20, Blksize: 1 << 20, RenameDirLimit: 1000, DirPrefetch: true}
}

// Stats count what the filesystem did. Reads and ReadBytes are the FUSE
// READ requests the daemon answered: a file opened through passthrough is
// read by the kernel from the cache file and adds nothing to them. Opens
// counts the opens asked (creates included); each one that succeeds is
// either a PassthroughOpen or a UserspaceOpen. Writes and WriteBytes are
// the FUSE WRITE requests the daemon answered: a file written by
// passthrough (PassthroughWriteOpens counts its creation) adds nothing.
type Stats struct {
	Lookups, Opens, PassthroughOpens, UserspaceOpens, Reads, ReadBytes, ReadErrors atomic.Int64
	Writes, WriteBytes, PassthroughWriteOpens                                      atomic.Int64
}

// FS is one mounted source.
type FS struct {
	meta   *meta.Cache
	store  *cache.Store
	fetch  *prefetch.Fetcher
	source string // backend.String(): the cache identity of the source
	prefix string // key prefix the mount shows as its root ("" or ending in "/")
	opts   Options
	log    *slog.Logger
	mtime  time.Time // directories' mtime: the mount's start

	passthrough atomic.Bool
	stats       Stats

	// The write path; nil on a read-only mount.
	wb *writeback.Manager
	be backend.Backend

	mu      sync.Mutex           // guards files, sweepAt
	files   map[string]*fileNode // nodes written here, by key (renameDir moves those still local)
	sweepAt int                  // size of files at which to forget nodes no longer local
	inos    movedInos            // numbers renamed nodes hold (inos.go)

	warmer *dirWarmer // nil unless DirPrefetch

	ptw ptWriters // passthrough write sessions (ptwrite.go)

	holds *backingHolds // the nodes go-fuse holds a backing registration for (backingholds.go)

	root       *dirNode               // the mounted root (Refresh walks the kernel's tree from it)
	mountpoint atomic.Pointer[string] // where it is mounted, for log lines ("" for a /dev/fd mount)
	controlDir atomic.Pointer[string] // the control socket's directory (user.strata.control), if served
}

// New builds the filesystem of source (whose keys under prefix form the
// tree) from its metadata cache, block store and fetcher.
func New(source, prefix string, m *meta.Cache, s *cache.Store, f *prefetch.Fetcher, opts Options) *FS {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	fsys := &FS{meta: m, store: s, fetch: f, source: source, prefix: prefix, opts: opts, log: opts.Logger, mtime: time.Now(), files: map[string]*fileNode{}, sweepAt: 64, holds: newBackingHolds()}
	fsys.root = newDirNode(fsys, prefix)
	fsys.passthrough.Store(opts.Passthrough)
	if opts.DirPrefetch {
		fsys.warmer = newDirWarmer(fsys)
	}
	return fsys
}

// Root is the root directory node, for mounting.
func (f *FS) Root() gofs.InodeEmbedder { return f.root }

// EnableWrites makes the mount writable through wb, with be for the
// namespace changes (delete, copy, directory markers).
func (f *FS) EnableWrites(wb *writeback.Manager, be backend.Backend) {
	f.wb, f.be = wb, be
}

// keyRef is a node's key, which a rename changes while operations read it.
type keyRef struct{ p atomic.Pointer[string] }

func (k *keyRef) get() string  { return *k.p.Load() }
func (k *keyRef) set(s string) { k.p.Store(&s) }

// Stats returns the live counters.
func (f *FS) Stats() *Stats { return &f.stats }

// PassthroughEnabled reports whether fully cached files are passed through.
func (f *FS) PassthroughEnabled() bool { return f.passthrough.Load() }

// observe reports one operation to Options.Observe.
func (f *FS) observe(op string, start time.Time, errno syscall.Errno) {
	if f.opts.Observe != nil {
		f.opts.Observe(op, time.Since(start), errno)
	}
}

// timeout is the kernel cache time for entries and attributes.
func (f *FS) timeout() time.Duration {
	if f.opts.TTL < 0 {
		return 365 * 24 * time.Hour
	}
	return f.opts.TTL
}

// entryTimeout is the kernel's entry and attribute timeout for an entry
// the metadata cache trusts for lease more (meta.Cache.LookupLease): no
// longer, or a directory listed again and again would renew the kernel's
// entries of names gone from the bucket past --metadata-ttl. Never 0:
// go-fuse takes 0 for "the mount's default", a whole TTL.
func (f *FS) entryTimeout(lease time.Duration) time.Duration {
	if lease < 0 { // meta.Indefinite
		return f.timeout()
	}
	return max(min(lease, f.timeout()), time.Nanosecond)
}

// inoOf derives a stable inode number from a node's identity, so the same
// key and version keep their inode across lookups and remounts.
func inoOf(kind byte, key, version string) uint64 {
	h := sha256.New()
	h.Write([]byte{kind})
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(version))
	var sum [32]byte
	ino := binary.LittleEndian.Uint64(h.Sum(sum[:0]))
	if ino <= 1 { // 1 is the root's
		ino += 2
	}
	return ino
}

func (f *FS) dirAttr(out *fuse.Attr) {
	out.Mode = syscall.S_IFDIR | f.opts.DirMode
	out.Nlink = 2
	out.Uid, out.Gid = f.opts.UID, f.opts.GID
	out.Blksize = f.opts.Blksize
	t := uint64(f.mtime.Unix())
	out.Mtime, out.Ctime, out.Atime = t, t, t
}

func (f *FS) fileAttr(e meta.Entry, out *fuse.Attr) {
	out.Mode = syscall.S_IFREG | f.opts.FileMode
	out.Nlink = 1
	out.Size = uint64(e.Size)
	out.Blocks = (uint64(e.Size) + 511) / 512
	out.Uid, out.Gid = f.opts.UID, f.opts.GID
	out.Blksize = f.opts.Blksize
	sec, nsec := uint64(e.MTime/1e9), uint32(e.MTime%1e9)
	out.Mtime, out.Ctime, out.Atime = sec, sec, sec
	out.Mtimensec, out.Ctimensec, out.Atimensec = nsec, nsec, nsec
}
