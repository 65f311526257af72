package fs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/prefetch"
)

// memBackend is an in-memory bucket with S3's delimiter semantics: it
// holds any key, including the ones no POSIX name can express ("a//b",
// "x/./y"), which a local directory cannot. Versions count writes.
type memBackend struct {
	mu   sync.Mutex
	objs map[string]memObject
	seq  int
	fail error // if set, Stat and List return it
	// beforeCopy, if set, runs at the start of every Copy (another
	// client's change between a listing and the copy of what it listed).
	beforeCopy func(src string)
}

type memObject struct {
	data    []byte
	version string
}

var (
	_ backend.Writer  = (*memBackend)(nil)
	_ backend.Deleter = (*memBackend)(nil)
	_ backend.Copier  = (*memBackend)(nil)
)

func newMemBackend(objs map[string]string) *memBackend {
	b := &memBackend{objs: map[string]memObject{}}
	for k, v := range objs {
		b.set(k, []byte(v))
	}
	return b
}

func (b *memBackend) set(key string, data []byte) backend.ObjectInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	o := memObject{data: data, version: fmt.Sprint("v", b.seq)}
	b.objs[key] = o
	return b.info(key, o)
}

func (b *memBackend) info(key string, o memObject) backend.ObjectInfo {
	return backend.ObjectInfo{Key: key, Size: int64(len(o.data)), Version: o.version, MTime: time.Unix(1_700_000_000, 0)}
}

// keys returns the keys in the bucket, sorted.
func (b *memBackend) keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ks []string
	for k := range b.objs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (b *memBackend) get(key string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objs[key]
	return string(o.data), ok
}

// failWith makes Stat and List fail with err (nil: work again).
func (b *memBackend) failWith(err error) {
	b.mu.Lock()
	b.fail = err
	b.mu.Unlock()
}

func (b *memBackend) String() string { return "mem://bucket" }

func (b *memBackend) Stat(ctx context.Context, key string) (backend.ObjectInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return backend.ObjectInfo{}, fmt.Errorf("mem: stat %s: %w", key, b.fail)
	}
	if o, ok := b.objs[key]; ok {
		return b.info(key, o), nil
	}
	return backend.ObjectInfo{}, fmt.Errorf("mem: stat %s: %w", key, backend.ErrNotExist)
}

// List returns everything in one page: the tests here are about names,
// not paging (cache/meta's tests page).
func (b *memBackend) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return backend.ListPage{}, fmt.Errorf("mem: list %s: %w", prefix, b.fail)
	}
	var page backend.ListPage
	seen := map[string]bool{}
	for k, o := range b.objs {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if i := strings.IndexByte(k[len(prefix):], '/'); i >= 0 && !opt.Recursive {
			if p := k[:len(prefix)+i+1]; !seen[p] {
				seen[p] = true
				page.Prefixes = append(page.Prefixes, p)
			}
			continue
		}
		page.Objects = append(page.Objects, b.info(k, o))
	}
	sort.Strings(page.Prefixes)
	sort.Slice(page.Objects, func(i, j int) bool { return page.Objects[i].Key < page.Objects[j].Key })
	return page, nil
}

func (b *memBackend) ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objs[key]
	if !ok {
		return nil, fmt.Errorf("mem: read %s: %w", key, backend.ErrNotExist)
	}
	if version != "" && version != o.version {
		return nil, fmt.Errorf("mem: read %s: %w", key, backend.ErrVersionChanged)
	}
	off = min(off, int64(len(o.data)))
	end := int64(len(o.data))
	if n >= 0 {
		end = min(end, off+n)
	}
	return io.NopCloser(bytes.NewReader(o.data[off:end])), nil
}

func (b *memBackend) Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error) {
	data := make([]byte, size)
	if _, err := r.ReadAt(data, 0); err != nil && err != io.EOF {
		return backend.ObjectInfo{}, err
	}
	return b.set(key, data), nil
}

func (b *memBackend) Delete(ctx context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objs, key)
	return nil
}

func (b *memBackend) Copy(ctx context.Context, src, srcVersion, dst string) (backend.ObjectInfo, error) {
	if b.beforeCopy != nil {
		b.beforeCopy(src)
	}
	b.mu.Lock()
	o, ok := b.objs[src]
	b.mu.Unlock()
	if !ok {
		return backend.ObjectInfo{}, fmt.Errorf("mem: copy %s: %w", src, backend.ErrNotExist)
	}
	if srcVersion != "" && srcVersion != o.version {
		return backend.ObjectInfo{}, fmt.Errorf("mem: copy %s: %w", src, backend.ErrPreconditionFailed)
	}
	return b.set(dst, bytes.Clone(o.data)), nil
}

// testFS is a writable Strata filesystem over a memBackend, driven
// through go-fuse's node bridge as the kernel would drive it, without a
// mount: requests name inodes by number (1 is the root).
type testFS struct {
	t    *testing.T
	be   *memBackend
	fsys *FS
	raw  fuse.RawFileSystem
}

const rootIno = 1

func newTestFS(t *testing.T, objs map[string]string) *testFS {
	t.Helper()
	return newTestFSWith(t, objs, nil)
}

// newTestFSWith is newTestFS with options changed by mod.
func newTestFSWith(t *testing.T, objs map[string]string, mod func(*Options)) *testFS {
	t.Helper()
	return newTestFSMeta(t, objs, mod, nil)
}

// newTestFSMeta is newTestFSWith with the metadata cache's options
// changed by metaMod as well (a test clock, a TTL).
func newTestFSMeta(t *testing.T, objs map[string]string, mod func(*Options), metaMod func(*meta.Options)) *testFS {
	t.Helper()
	return newTestFSWriteback(t, objs, mod, metaMod, writeback.DefaultOptions())
}

// newTestFSWriteback is newTestFSMeta with the write path's options given
// (an upload mode, a delay).
func newTestFSWriteback(t *testing.T, objs map[string]string, mod func(*Options), metaMod func(*meta.Options), wo writeback.Options) *testFS {
	t.Helper()
	return newTestFSBacked(t, objs, mod, metaMod, wo, nil)
}

// newTestFSBacked is newTestFSWriteback with passthrough on and backing
// files registered through b, as a mount's are (kernelCalls); b nil:
// passthrough off.
func newTestFSBacked(t *testing.T, objs map[string]string, mod func(*Options), metaMod func(*meta.Options), wo writeback.Options, b Backing) *testFS {
	t.Helper()
	be := newMemBackend(objs)
	eng, err := uring.New(uring.KindPread, uring.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	so := cache.DefaultOptions()
	so.Engine = eng
	so.MaxBytes = 1 << 30
	so.MinFree = 0
	store, err := cache.Open(t.TempDir(), so)
	if err != nil {
		t.Fatal(err)
	}
	mo := meta.DefaultOptions()
	if metaMod != nil {
		metaMod(&mo)
	}
	mc := meta.New(be, store.Index(), mo)
	fetch := prefetch.New(be, prefetch.NewBudget(64<<20, so.BlockSize), prefetch.DefaultOptions())
	opts := DefaultOptions()
	opts.DirPrefetch = false
	if mod != nil {
		mod(&opts)
	}
	fsys := New(be.String(), "", mc, store, fetch, opts)
	wb, err := writeback.New(store, be, wo, mc)
	if err != nil {
		t.Fatal(err)
	}
	fsys.EnableWrites(wb, be)
	t.Cleanup(func() {
		wb.Close()
		mc.Close() // waits for listing loads, which write to the index
		fetch.Close()
		_ = store.Close()
		_ = eng.Close()
	})
	gopts := &gofs.Options{RootStableAttr: rootStableAttr()}
	if b != nil {
		fsys.passthrough.Store(true)
		gopts.ServerCallbacks = &kernelCalls{backing: b, holds: fsys.holds}
	}
	return &testFS{t: t, be: be, fsys: fsys, raw: gofs.NewNodeFS(fsys.Root(), gopts)}
}

// lookup resolves a slash-separated path from the root, one Lookup per
// component, and returns the last entry (or the first errno).
func (f *testFS) lookup(path string) (fuse.EntryOut, syscall.Errno) {
	var out fuse.EntryOut
	out.NodeId = rootIno
	for _, name := range strings.Split(path, "/") {
		parent := out.NodeId
		out = fuse.EntryOut{}
		if st := f.raw.Lookup(nil, &fuse.InHeader{NodeId: parent}, name, &out); st != fuse.OK {
			return out, syscall.Errno(st)
		}
	}
	return out, 0
}

// dirIno looks up a directory ("" is the root).
func (f *testFS) dirIno(path string) uint64 {
	f.t.Helper()
	if path == "" {
		return rootIno
	}
	out, errno := f.lookup(path)
	if errno != 0 || out.Attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		f.t.Fatalf("lookup %q: errno %v mode %o, want a directory", path, errno, out.Attr.Mode)
	}
	return out.NodeId
}

// readdir lists a directory the way readdir(3) does (rawDirents), without
// "." and "..". Each name is suffixed "/" for a directory.
func (f *testFS) readdir(path string) []string {
	f.t.Helper()
	var names []string
	for _, de := range f.rawDirents(path, 0) {
		if de.name == "." || de.name == ".." {
			continue
		}
		if de.typ == syscall.DT_DIR {
			de.name += "/"
		}
		names = append(names, de.name)
	}
	return names
}

// rename renames oldPath to newPath (both from the root) with renameat2
// flags.
func (f *testFS) rename(oldPath, newPath string, flags uint32) syscall.Errno {
	f.t.Helper()
	od, on := splitPath(oldPath)
	nd, nn := splitPath(newPath)
	in := &fuse.RenameIn{InHeader: fuse.InHeader{NodeId: f.dirIno(od)}, Newdir: f.dirIno(nd), Flags: flags}
	return syscall.Errno(f.raw.Rename(nil, in, on, nn))
}

func splitPath(p string) (dir, name string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

// open opens node ino with flags and returns its file handle.
func (f *testFS) open(ino uint64, flags uint32) uint64 {
	f.t.Helper()
	var out fuse.OpenOut
	if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}, Flags: flags}, &out); s != fuse.OK {
		f.t.Fatalf("open of inode %d: %v", ino, s)
	}
	return out.Fh
}

// read reads up to n bytes at off through handle fh of node ino.
func (f *testFS) read(ino, fh uint64, off int64, n int) ([]byte, syscall.Errno) {
	buf := make([]byte, n)
	res, s := f.raw.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: fh, Offset: uint64(off), Size: uint32(n)}, buf)
	if s != fuse.OK {
		return nil, syscall.Errno(s)
	}
	defer res.Done()
	b, s := res.Bytes(buf)
	return append([]byte(nil), b...), syscall.Errno(s)
}

// release releases handle fh of node ino.
func (f *testFS) release(ino, fh uint64) {
	f.raw.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: fh})
}
