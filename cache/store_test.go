package cache

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache/uring"
)

// preadEngine is the simplest correct engine, for this package's tests.
type preadEngine struct{}

func (preadEngine) Do(ops []uring.Op) {
	for i := range ops {
		op := &ops[i]
		if op.Write {
			op.N, op.Err = unix.Pwrite(op.Fd, op.Buf, op.Off)
		} else {
			op.N, op.Err = unix.Pread(op.Fd, op.Buf, op.Off)
		}
	}
}
func (preadEngine) ReadAt(fd int, p []byte, off int64) (int, error)  { return unix.Pread(fd, p, off) }
func (preadEngine) WriteAt(fd int, p []byte, off int64) (int, error) { return unix.Pwrite(fd, p, off) }
func (preadEngine) Name() string                                     { return "pread" }
func (preadEngine) Close() error                                     { return nil }

type fakeDisk struct{ total, avail atomic.Int64 }

func (d *fakeDisk) Statfs(string) (int64, int64, error) { return d.total.Load(), d.avail.Load(), nil }

type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time  { return time.Unix(c.t.Load(), 0) }
func (c *clock) advance(s int64) { c.t.Add(s) }

const bs = 4096

func testOpts() Options {
	o := DefaultOptions()
	o.BlockSize = bs
	o.Engine = preadEngine{}
	o.MaxBytes = 1 << 30
	o.MinFree = 0
	return o
}

func openStore(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fill(o *Object, t *testing.T, data []byte) {
	t.Helper()
	for i := range o.NumBlocks() {
		if err := o.WriteBlock(i, data[i*bs:i*bs+o.BlockLen(i)]); err != nil {
			t.Fatal(err)
		}
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestWriteReadPersistVerify(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(3*bs + 100)
	key := ObjectKey{Source: "s3://b", Key: "a/b", Version: "v1", Size: int64(len(data))}

	s := openStore(t, dir, testOpts())
	o, err := s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	if o.Complete() || o.HasRange(0, 1) {
		t.Fatal("new object claims blocks")
	}
	if err := o.WriteBlock(0, data[:10]); err == nil {
		t.Fatal("short block accepted")
	}
	fill(o, t, data)
	if !o.Complete() || !o.Verified() {
		t.Fatal("written object not complete and verified")
	}
	got := make([]byte, len(data)+50)
	n, err := o.ReadAt(got, 0)
	if n != len(data) || !errors.Is(err, io.EOF) || !bytes.Equal(got[:n], data) {
		t.Fatalf("ReadAt: n=%d err=%v", n, err)
	}
	if s.Used() != int64(len(data)) {
		t.Fatalf("used %d want %d", s.Used(), len(data))
	}
	o.Release()
	s.Close()

	// A clean shutdown: the next run trusts what it finds.
	s = openStore(t, dir, testOpts())
	if s.Used() != int64(len(data)) {
		t.Fatalf("used after reopen %d", s.Used())
	}
	o, err = s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Trusted() || !o.Complete() || !o.Verified() {
		t.Fatalf("after a clean shutdown: trusted=%v complete=%v verified=%v (want all true)", s.Trusted(), o.Complete(), o.Verified())
	}
	o.Release()
	CloseAsCrash(s)

	// After a crash every block is checked again.
	NoBackgroundVerify(t)
	s = openStore(t, dir, testOpts())
	defer s.Close()
	o, err = s.Acquire(key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	if s.Trusted() || !o.Complete() || o.Verified() {
		t.Fatalf("after a crash: trusted=%v complete=%v verified=%v (want false, true, false)", s.Trusted(), o.Complete(), o.Verified())
	}
	// A read in the middle of a block verifies the whole block.
	p := make([]byte, 10)
	if _, err := o.ReadAt(p, bs+5); err != nil || !bytes.Equal(p, data[bs+5:bs+15]) {
		t.Fatalf("partial read: %v", err)
	}
	if bad, err := o.Verify(); bad != 0 || err != nil || !o.Verified() {
		t.Fatalf("Verify: bad=%d err=%v verified=%v", bad, err, o.Verified())
	}
}

func TestCorruptBlockIsDropped(t *testing.T) {
	dir := t.TempDir()
	data := randBytes(2 * bs)
	key := ObjectKey{Source: "s", Key: "k", Version: "v", Size: int64(len(data))}
	s := openStore(t, dir, testOpts())
	o, _ := s.Acquire(key)
	fill(o, t, data)
	id := o.ID()
	o.Release()
	CloseAsCrash(s) // a crash, not a clean shutdown: blocks found are checked
	NoBackgroundVerify(t)

	flipByte(t, s.pathOf(id), bs+1)

	s = openStore(t, dir, testOpts())
	defer s.Close()
	o, _ = s.Acquire(key)
	defer o.Release()
	p := make([]byte, bs)
	if _, err := o.ReadAt(p, 0); err != nil {
		t.Fatalf("good block: %v", err)
	}
	if _, err := o.ReadAt(p, bs); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped block: want ErrCorrupt, got %v", err)
	}
	if o.Has(1) || !o.Has(0) {
		t.Fatal("bad block not dropped, or good one dropped")
	}
	if s.Used() != bs {
		t.Fatalf("used %d after drop", s.Used())
	}
	if err := o.WriteBlock(1, data[bs:]); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ReadAt(p, bs); err != nil || !bytes.Equal(p, data[bs:]) {
		t.Fatalf("refetched block: %v", err)
	}
}

func TestEvictionLRUAndPinning(t *testing.T) {
	clk := &clock{}
	clk.t.Store(1000)
	o := testOpts()
	o.MaxBytes = 10 * bs
	o.Clock = clk.now
	s := openStore(t, t.TempDir(), o)
	defer s.Close()

	var objs []*Object
	for i := range 4 {
		obj, err := s.Acquire(ObjectKey{Source: "s", Key: string(rune('a' + i)), Version: "v", Size: 2 * bs})
		if err != nil {
			t.Fatal(err)
		}
		fill(obj, t, randBytes(2*bs))
		objs = append(objs, obj)
		clk.advance(100)
	}
	// a is oldest but stays pinned; b and c are released.
	objs[1].Release()
	objs[2].Release()
	if s.Used() != 8*bs {
		t.Fatalf("used %d", s.Used())
	}
	// 5th object pushes past the high-water mark (95% of 10 blocks).
	e, _ := s.Acquire(ObjectKey{Source: "s", Key: "e", Version: "v", Size: 2 * bs})
	fill(e, t, randBytes(2*bs))
	s.EvictNow()
	if s.Used() > 9*bs {
		t.Fatalf("used %d after eviction, limit %d", s.Used(), 10*bs)
	}
	if !objs[0].Complete() || !objs[3].Complete() || !e.Complete() {
		t.Fatal("a pinned object lost blocks")
	}
	// b (least recently used, unpinned) must be gone before c.
	b, _ := s.Acquire(ObjectKey{Source: "s", Key: "b", Version: "v", Size: 2 * bs})
	if b.Has(0) {
		t.Fatal("b survived eviction")
	}
	b.Release()
	objs[0].Release()
	objs[3].Release()
	e.Release()
}

func TestNoSpace(t *testing.T) {
	o := testOpts()
	o.MaxBytes = bs
	s := openStore(t, t.TempDir(), o)
	defer s.Close()
	obj, _ := s.Acquire(ObjectKey{Source: "s", Key: "k", Version: "v", Size: 2 * bs})
	defer obj.Release()
	data := randBytes(2 * bs)
	if err := obj.WriteBlock(0, data[:bs]); err != nil {
		t.Fatal(err)
	}
	if err := obj.WriteBlock(1, data[bs:]); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("want ErrNoSpace, got %v", err)
	}
	if obj.Has(1) || s.Used() != bs {
		t.Fatalf("refused block accounted: has=%v used=%d", obj.Has(1), s.Used())
	}
}

func TestFreeSpaceFloor(t *testing.T) {
	d := &fakeDisk{}
	d.total.Store(100 * bs)
	d.avail.Store(12 * bs)
	o := testOpts()
	o.MaxBytes = 0
	o.MinFree = 0.10 // keep 10 blocks free: room for 2
	o.Disk = d
	s := openStore(t, t.TempDir(), o)
	defer s.Close()
	if got := s.Limit(); got != 2*bs {
		t.Fatalf("limit %d want %d", got, 2*bs)
	}
}

// TestNewVersionRetiresOld: a version replaced by a newer one is kept
// while open and for replacedGrace, then retired (deleted at its last
// release if still open then).
func TestNewVersionRetiresOld(t *testing.T) {
	defer func(g time.Duration) { replacedGrace = g }(replacedGrace)
	replacedGrace = 200 * time.Millisecond
	s := openStore(t, t.TempDir(), testOpts())
	defer s.Close()
	v1, _ := s.Acquire(ObjectKey{Source: "s", Key: "k", Version: "v1", Size: bs})
	fill(v1, t, randBytes(bs))
	id1 := v1.ID()
	v2, _ := s.Acquire(ObjectKey{Source: "s", Key: "k", Version: "v2", Size: bs})
	defer v2.Release()
	time.Sleep(replacedGrace + 100*time.Millisecond)
	if _, ok, _ := s.ix.GetObject(id1); !ok {
		t.Fatal("pinned old version deleted while open")
	}
	v1.Release() // last reference, past the grace: deleted now
	if _, ok, _ := s.ix.GetObject(id1); ok {
		t.Fatal("old version kept after release")
	}
	if s.Used() != 0 {
		t.Fatalf("used %d", s.Used())
	}
}

func TestDirLocked(t *testing.T) {
	dir := t.TempDir()
	o := testOpts()
	o.Owner = "mount /mnt/x"
	s := openStore(t, dir, o)
	defer s.Close()
	_, err := Open(dir, testOpts())
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "/mnt/x") {
		t.Fatalf("second open: %v", err)
	}
	if h := LockHolder(dir); !strings.Contains(h, "/mnt/x") {
		t.Fatalf("LockHolder %q", h)
	}
}

func TestConcurrentWritersReaders(t *testing.T) {
	s := openStore(t, t.TempDir(), testOpts())
	defer s.Close()
	data := randBytes(16 * bs)
	key := ObjectKey{Source: "s", Key: "k", Version: "v", Size: int64(len(data))}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := s.Acquire(key)
			if err != nil {
				t.Error(err)
				return
			}
			defer o.Release()
			for k := range 16 {
				i := int64((k + g) % 16)
				if err := o.WriteBlock(i, data[i*bs:(i+1)*bs]); err != nil {
					t.Error(err)
				}
				// Another goroutine may be mid-write of the same block.
				for deadline := time.Now().Add(5 * time.Second); !o.Has(i) && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				p := make([]byte, bs)
				if _, err := o.ReadAt(p, i*bs); err != nil || !bytes.Equal(p, data[i*bs:(i+1)*bs]) {
					t.Errorf("read block %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	if s.Used() != int64(len(data)) {
		t.Fatalf("used %d want %d (double counted?)", s.Used(), len(data))
	}
}

func TestPlanEviction(t *testing.T) {
	id := func(b byte) (x [32]byte) { x[0] = b; return }
	cands := []candidate{
		{id: id(1), lastAccess: 30, bytes: 10, blockSize: 10},
		{id: id(2), lastAccess: 10, bytes: 10, blockSize: 10, pinned: true},
		{id: id(3), lastAccess: 20, bytes: 10, blockSize: 10},
		{id: id(4), lastAccess: 5, bytes: 1000, blockSize: 10},
	}
	tests := []struct {
		need int64
		want []victim
	}{
		{0, nil},
		{15, []victim{{id: id(4), tailBlocks: 2, frees: 20}}},
		{2000, []victim{{id: id(4), whole: true, frees: 1000}, {id: id(3), whole: true, frees: 10}, {id: id(1), whole: true, frees: 10}}},
	}
	for _, tc := range tests {
		got := planEviction(cands, tc.need)
		if len(got) != len(tc.want) {
			t.Fatalf("need %d: got %+v", tc.need, got)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("need %d: got %+v want %+v", tc.need, got, tc.want)
			}
		}
	}
}

func TestLinkCarriesACompleteCopy(t *testing.T) {
	s := openStore(t, t.TempDir(), testOpts())
	defer s.Close()
	data := randBytes(3*bs + 5)
	from := ObjectKey{Source: "s", Key: "tmp", Version: "v1", Size: int64(len(data))}
	o, _ := s.Acquire(from)
	for i := int64(0); i < 2; i++ { // not complete yet
		if err := o.WriteBlock(i, data[i*bs:(i+1)*bs]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Link(from, ObjectKey{Source: "s", Key: "final", Version: "v2", Size: from.Size}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("linking a partial object: %v", err)
	}
	for i := int64(2); i < o.NumBlocks(); i++ {
		if err := o.WriteBlock(i, data[i*bs:i*bs+o.BlockLen(i)]); err != nil {
			t.Fatal(err)
		}
	}
	o.Release()
	to := ObjectKey{Source: "s", Key: "final", Version: "v2", Size: from.Size}
	if err := s.Link(from, to); err != nil {
		t.Fatal(err)
	}
	s.Forget(from)
	c, _ := s.Acquire(to)
	defer c.Release()
	got := make([]byte, len(data))
	if !c.Complete() {
		t.Fatal("linked copy incomplete")
	}
	if n, err := c.ReadAt(got, 0); n != len(data) || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(got, data) {
		t.Fatalf("linked copy: %d %v", n, err)
	}
}

// flipByte inverts the byte at off of the file at path, as bit rot or a
// torn write would change it.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0xff}, off); err != nil {
		t.Fatal(err)
	}
}
