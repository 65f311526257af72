package uring

import (
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// newUringT returns a one-ring io_uring engine and its ring's shard, for
// tests that look inside the ring.
func newUringT(t *testing.T, opts Options) (*uringEngine, *shard) {
	t.Helper()
	opts.Rings = 1
	e := newEngine(t, KindUring, opts).(*uringEngine)
	return e, e.shards[0]
}

// warmFile writes size random bytes to a new file (so they sit in the page
// cache) and returns its fd and the model.
func warmFile(t testing.TB, size int) (int, model) {
	t.Helper()
	fd, _ := openTemp(t, "warm")
	m := model(randBytes(rand.New(rand.NewPCG(9, 9)), size))
	if n, err := unix.Pwrite(fd, m, 0); n != size || err != nil {
		t.Fatalf("pwrite: %d %v", n, err)
	}
	return fd, m
}

func readOps(fd int, n, size int, off func(i int) int64) []Op {
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{Fd: fd, Off: off(i), Buf: make([]byte, size)}
	}
	return ops
}

func checkReads(t *testing.T, m model, ops []Op) {
	t.Helper()
	for i := range ops {
		if err := checkRead(m, &ops[i]); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
}

// TestOneEnterPerBatch: a batch that fits the SQ is one io_uring_enter;
// one more op than the SQ holds costs exactly one more.
func TestOneEnterPerBatch(t *testing.T) {
	e, s := newUringT(t, Options{Entries: 64})
	if got := s.ring.sqEntries; got != 64 {
		t.Fatalf("SQ has %d entries, want 64", got)
	}
	fd, m := warmFile(t, 1<<20)
	for _, tt := range []struct{ ops, enters int64 }{{1, 1}, {32, 1}, {64, 1}, {65, 2}, {128, 2}} {
		ops := readOps(fd, int(tt.ops), 4096, func(i int) int64 { return int64(i*4096) % (1 << 20) })
		before := s.st.enters.Load()
		e.Do(ops)
		if got := s.st.enters.Load() - before; got != tt.enters {
			t.Errorf("batch of %d: %d io_uring_enter calls, want %d", tt.ops, got, tt.enters)
		}
		checkReads(t, m, ops)
	}
}

// TestSQFull: batches far bigger than the SQ and than the in-flight limit
// are split, flushed and throttled, and every op still lands.
func TestSQFull(t *testing.T) {
	e, s := newUringT(t, Options{Entries: 8}) // SQ 8, CQ 16, 16 ops in flight
	if s.ring.sqEntries != 8 || len(s.reqs) != 16 {
		t.Fatalf("ring: SQ %d, slots %d; want 8, 16", s.ring.sqEntries, len(s.reqs))
	}
	fd, path := openTemp(t, "f")
	r := rand.New(rand.NewPCG(5, 5))
	var m model
	for round := range 5 {
		// 300 writes of 4 KiB+1 at distinct offsets, then 300 reads of them.
		ops := make([]Op, 300)
		for i := range ops {
			ops[i] = Op{Fd: fd, Off: int64(i) * 8192, Buf: randBytes(r, 4097), Write: true}
		}
		before := s.st.enters.Load()
		e.Do(ops)
		for i := range ops {
			if ops[i].Err != nil || ops[i].N != 4097 {
				t.Fatalf("round %d write %d: %d %v", round, i, ops[i].N, ops[i].Err)
			}
			m.write(ops[i].Off, ops[i].Buf)
		}
		if got := s.st.enters.Load() - before; got < 300/8 {
			t.Errorf("300 ops through an 8-entry SQ took %d enters, want >= %d", got, 300/8)
		}
		reads := readOps(fd, 300, 4097, func(i int) int64 { return int64(i) * 8192 })
		e.Do(reads)
		checkReads(t, m, reads)
	}
	checkFile(t, path, m)
}

// TestCQOverflow lets more ops be in flight than the CQ holds (a test
// knob; production caps in-flight ops at the CQ size), so the kernel parks
// CQEs in its overflow list and the engine must flush them.
func TestCQOverflow(t *testing.T) {
	e, s := newUringT(t, Options{Entries: 4, slots: 256}) // CQ of 8
	fd, m := warmFile(t, 1<<20)
	for round := range 50 {
		ops := readOps(fd, 256, 4096, func(i int) int64 { return int64((i*7+round)%256) * 4096 })
		e.Do(ops)
		checkReads(t, m, ops)
	}
	if s.st.overflows.Load() == 0 {
		t.Errorf("no CQ overflow flush happened: the test did not reach the overflow path")
	}
	t.Logf("overflow flushes %d, busy retries %d", s.st.overflows.Load(), s.st.busy.Load())
}

// TestShortTransfers: with every SQE capped at 1000 bytes, each op
// completes through many short-transfer resubmissions.
func TestShortTransfers(t *testing.T) {
	e, s := newUringT(t, Options{maxChunk: 1000})
	fd, m := warmFile(t, 3<<20)
	ops := readOps(fd, 8, 1<<20, func(i int) int64 { return int64(i) * 400_000 })
	e.Do(ops)
	checkReads(t, m, ops)
	want := int64(0) // every 1000-byte piece after an op's first is a resubmission
	for _, op := range ops {
		want += int64((op.N+999)/1000 - 1)
	}
	if got := s.st.resubmits.Load(); got < want || want < 7000 {
		t.Errorf("%d resubmissions, want at least %d (> 7000)", got, want)
	}
}
