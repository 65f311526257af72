package fs

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/meta"
)

// The kernel keeps an entry (and its attributes) for the timeouts a
// lookup or a readdirplus hands it. They are what is left of the TTL of
// the metadata the entry came from, not a whole TTL: README's "Staleness
// is bounded by --metadata-ttl". Before the fix an entry answered from a
// listing about to expire got a full TTL, and a directory listed again and
// again kept a deleted object visible for up to twice the TTL.

// testClock is the metadata cache's clock in these tests.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

// newLeaseFS is a filesystem whose metadata TTL is ttl, on clk.
func newLeaseFS(t *testing.T, objs map[string]string, ttl time.Duration, clk *testClock) *testFS {
	clk.ns.Store(time.Unix(1_800_000_000, 0).UnixNano())
	return newTestFSMeta(t, objs, func(o *Options) { o.TTL = ttl }, func(o *meta.Options) {
		o.TTL, o.Clock, o.ListPrefetch = ttl, clk.now, 0
	})
}

func TestEntryTimeoutsAreWhatIsLeftOfTheTTL(t *testing.T) {
	const ttl = time.Minute
	clk := &testClock{}
	f := newLeaseFS(t, map[string]string{"d/a": "a", "d/b": "b"}, ttl, clk)
	f.readdir("d") // the listing of d/, fetched now
	clk.ns.Add(int64(50 * time.Second))

	out, errno := f.lookup("d/a")
	if errno != 0 {
		t.Fatal(errno)
	}
	assertLeft(t, "lookup of d/a, answered by a listing 50 s old", out, 10*time.Second)
	for name, e := range f.readdirPlus("d") {
		assertLeft(t, "readdirplus of d/"+name+", a listing 50 s old", e, 10*time.Second)
	}

	// Expired: a lookup asks the bucket, and its answer is new.
	clk.ns.Add(int64(20 * time.Second))
	if out, errno = f.lookup("d/b"); errno != 0 {
		t.Fatal(errno)
	}
	assertLeft(t, "lookup of d/b, just asked of the bucket", out, ttl)

	// The bucket unreachable: a stale answer is not to be kept.
	f.be.failWith(backend.ErrUnavailable)
	clk.ns.Add(int64(2 * ttl))
	if out, errno = f.lookup("d/b"); errno != 0 {
		t.Fatalf("a known name with the bucket down: %v", errno)
	}
	assertLeft(t, "lookup of d/b, stale (the bucket down)", out, time.Nanosecond)
}

// Under an indefinite TTL the kernel keeps entries for good, as before.
func TestEntryTimeoutsUnderAnIndefiniteTTL(t *testing.T) {
	clk := &testClock{}
	f := newLeaseFS(t, map[string]string{"d/a": "a"}, meta.Indefinite, clk)
	f.readdir("d")
	clk.ns.Add(int64(24 * time.Hour))
	out, errno := f.lookup("d/a")
	if errno != 0 {
		t.Fatal(errno)
	}
	if got, want := out.EntryTimeout(), f.fsys.timeout(); got != want || out.AttrTimeout() != want {
		t.Fatalf("indefinite TTL: entry timeout %v, attr timeout %v, want %v", got, out.AttrTimeout(), want)
	}
}

// assertLeft checks an entry's timeouts: more than nothing (go-fuse would
// read 0 as the mount's default, a full TTL) and at most left.
func assertLeft(t *testing.T, what string, out fuse.EntryOut, left time.Duration) {
	t.Helper()
	for kind, d := range map[string]time.Duration{"entry": out.EntryTimeout(), "attr": out.AttrTimeout()} {
		if d <= 0 || d > left {
			t.Errorf("%s: %s timeout %v, want more than 0 and at most %v", what, kind, d, left)
		}
	}
}

// readdirPlus lists a directory with READDIRPLUS, as the kernel does for a
// first readdir, and returns the entry handed out with each name.
func (f *testFS) readdirPlus(path string) map[string]fuse.EntryOut {
	f.t.Helper()
	ino := f.dirIno(path)
	var open fuse.OpenOut
	if st := f.raw.OpenDir(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}}, &open); st != fuse.OK {
		f.t.Fatalf("opendir %q: %v", path, st)
	}
	defer f.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: open.Fh})
	buf := make([]byte, 8192)
	in := &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: open.Fh, Size: uint32(len(buf))}
	if st := f.raw.ReadDirPlus(nil, in, fuse.NewDirEntryList(buf, 0)); st != fuse.OK {
		f.t.Fatalf("readdirplus %q: %v", path, st)
	}
	// Records: an EntryOut, a struct fuse_dirent (ino, off, namelen,
	// type), the name padded to 8 bytes.
	const outSize = int(unsafe.Sizeof(fuse.EntryOut{}))
	got := map[string]fuse.EntryOut{}
	for len(buf) >= outSize+24 {
		e := *(*fuse.EntryOut)(unsafe.Pointer(&buf[0]))
		n := int(binary.LittleEndian.Uint32(buf[outSize+16:]))
		if n == 0 {
			break
		}
		name := string(buf[outSize+24 : outSize+24+n])
		if name != "." && name != ".." {
			got[name] = e
		}
		buf = buf[min(len(buf), outSize+(24+n+7)&^7):]
	}
	if len(got) == 0 {
		f.t.Fatalf("readdirplus %q: no entries", path)
	}
	return got
}
