package uring

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"
)

// uringEngine spreads Do calls round-robin over independent rings, one
// per CPU by default. A ring submits under the kernel's per-ring lock and
// copies page-cache hits inline on the submitting thread, so one ring
// moves data on one thread at a time; N rings let N callers copy at once.
// doc.go explains the structure and the lock order.
type uringEngine struct {
	gate   sync.RWMutex // Do/ReadAt/WriteAt hold it shared, Close exclusive
	closed bool         // guarded by gate

	shards []*shard
	rr     atomic.Uint32 // round-robin shard choice
}

// shard is one ring with its own locks, in-flight table and reaper: a
// mutex-protected SQ that any goroutine submits to, a CQ that submitters
// reap opportunistically and a dedicated reaper goroutine drains when ops
// complete asynchronously. Shards share nothing but the Options.
type shard struct {
	ring *ring
	sqMu sync.Mutex // the SQ producer side of ring
	cqMu sync.Mutex // the CQ consumer side of ring; a leaf lock

	// reqs is the in-flight table indexed by user_data. It keeps every
	// buffer the kernel may touch reachable until its final CQE.
	reqs    []req
	free    chan uint32  // ids of unused reqs: a token licenses one op in flight
	pending atomic.Int64 // ops handed to the kernel whose final CQE is unprocessed

	kick       chan struct{} // cap 1: wakes a reaper parked with nothing pending
	stop       chan struct{} // closed by Close
	stopping   atomic.Bool
	reaperDone chan struct{}

	chunk int
	st    stats
}

// req is one op in flight.
type req struct {
	// seq is bumped by whoever hands the req to the kernel and loaded by
	// whoever takes it back from a CQE. The kernel orders the two; this
	// makes the order visible to Go's race detector too.
	seq     atomic.Uint32
	b       *batch
	op      *Op
	done    int // bytes transferred so far
	retries int // EINTR/EAGAIN/ECANCELED results resubmitted
}

// batch is one Do in progress. Pooled: Do allocates nothing in steady state.
type batch struct {
	ops       []Op
	one       [1]Op // backing for ReadAt/WriteAt
	ids       []uint32
	remaining atomic.Int64  // ops without a final result yet
	done      chan struct{} // cap 1: receives once when remaining hits 0
}

var batchPool = sync.Pool{New: func() any { return &batch{done: make(chan struct{}, 1)} }}

const (
	wakeUserData = math.MaxUint64 // the NOP Close submits to wake the reaper
	maxRetries   = 64
)

func newUring(o Options) (*uringEngine, error) {
	e := &uringEngine{}
	for range o.Rings {
		sh, err := newShard(o)
		if err != nil {
			return nil, errors.Join(err, e.closeShards())
		}
		e.shards = append(e.shards, sh)
	}
	return e, nil
}

func newShard(o Options) (*shard, error) {
	r, err := openRing(uint32(o.Entries))
	if err != nil {
		return nil, err
	}
	slots := int(r.p.CqEntries) // at most one unreaped CQE per slot: no overflow
	if o.slots > 0 {
		slots = o.slots
	}
	s := &shard{
		ring:       r,
		reqs:       make([]req, slots),
		free:       make(chan uint32, slots),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		reaperDone: make(chan struct{}),
		chunk:      o.maxChunk,
	}
	for i := range slots {
		s.free <- uint32(i)
	}
	go s.reaper()
	return s, nil
}

func (e *uringEngine) Name() string { return string(KindUring) }

func (e *uringEngine) Do(ops []Op) {
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed {
		for i := range ops {
			ops[i].N, ops[i].Err = 0, closedError(&ops[i])
		}
		return
	}
	b := batchPool.Get().(*batch)
	b.ops = ops
	e.pick().run(b)
	b.ops = nil
	batchPool.Put(b)
}

func (e *uringEngine) ReadAt(fd int, p []byte, off int64) (int, error) {
	return e.single(Op{Fd: fd, Buf: p, Off: off})
}

func (e *uringEngine) WriteAt(fd int, p []byte, off int64) (int, error) {
	return e.single(Op{Fd: fd, Buf: p, Off: off, Write: true})
}

func (e *uringEngine) single(op Op) (int, error) {
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed {
		return 0, closedError(&op)
	}
	b := batchPool.Get().(*batch)
	b.one[0] = op
	b.ops = b.one[:]
	e.pick().run(b)
	op = b.one[0]
	b.one[0], b.ops = Op{}, nil
	batchPool.Put(b)
	return op.N, op.Err
}

func (e *uringEngine) pick() *shard {
	return e.shards[int(e.rr.Add(1))%len(e.shards)]
}

// run submits every op of b, as few io_uring_enter calls as the free
// slots and the SQ allow, and returns when all have their final CQE.
func (sh *shard) run(b *batch) {
	ops := b.ops
	live := 0
	for i := range ops {
		op := &ops[i]
		op.N, op.Err = 0, validate(op)
		if op.Err == nil && len(op.Buf) > 0 {
			live++
		}
	}
	if live == 0 {
		return
	}
	b.remaining.Store(int64(live))
	ids := b.ids[:0]
	for i := 0; i < len(ops); {
		op := &ops[i]
		if len(op.Buf) == 0 || op.Err != nil {
			i++
			continue
		}
		id, ok := sh.tryAcquire()
		if !ok {
			if len(ids) > 0 { // never block holding unsubmitted slots
				sh.issue(ids)
				ids = ids[:0]
				continue
			}
			id = sh.acquire()
		}
		r := &sh.reqs[id]
		r.b, r.op, r.done, r.retries = b, op, 0, 0
		ids = append(ids, id)
		i++
	}
	if len(ids) > 0 {
		sh.issue(ids)
	}
	b.ids = ids[:0]
	if b.remaining.Load() != 0 {
		sh.reap(false) // page-cache hits complete inside io_uring_enter
	}
	if b.remaining.Load() != 0 {
		sh.wakeReaper()
	}
	<-b.done
}

func (sh *shard) tryAcquire() (uint32, bool) {
	select {
	case id := <-sh.free:
		return id, true
	default:
		return 0, false
	}
}

// acquire blocks for a free slot. Every held slot is submitted by now, so
// slots come back as their CQEs are reaped.
func (sh *shard) acquire() uint32 {
	sh.reap(false)
	if id, ok := sh.tryAcquire(); ok {
		return id
	}
	sh.wakeReaper()
	return <-sh.free
}

func (sh *shard) wakeReaper() {
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

func (sh *shard) issue(ids []uint32) {
	sh.pending.Add(int64(len(ids)))
	sh.submit(ids)
}

// submit fills one SQE per id and enters the kernel once per SQ-full of
// them (once in all when the batch fits). SQEs the kernel refuses fail
// their ops with the error.
func (sh *shard) submit(ids []uint32) {
	var refused []uint64
	var err error
	sh.sqMu.Lock()
	for _, id := range ids {
		if sh.ring.sqFull() {
			ref, ferr := sh.ring.flush(&sh.st)
			refused, err = append(refused, ref...), cmpOr(ferr, err)
		}
		sh.fill(sh.ring.nextSQE(), id)
	}
	ref, ferr := sh.ring.flush(&sh.st)
	refused, err = append(refused, ref...), cmpOr(ferr, err)
	sh.sqMu.Unlock()
	for _, ud := range refused {
		if ud != wakeUserData {
			sh.reqs[ud].seq.Load()
			sh.finish(uint32(ud), err)
		}
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// fill writes the SQE for the untransferred rest of req id. It is where
// the req passes to the kernel, so it ends with the seq bump.
func (sh *shard) fill(s *sqe, id uint32) {
	r := &sh.reqs[id]
	op := r.op
	p := op.Buf[r.done:]
	if len(p) > sh.chunk {
		p = p[:sh.chunk]
	}
	s.Opcode = opRead
	if op.Write {
		s.Opcode = opWrite
	}
	s.Fd = int32(op.Fd)
	s.Off = uint64(op.Off) + uint64(r.done)
	s.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))
	s.Len = uint32(len(p))
	s.UserData = uint64(id)
	r.seq.Add(1)
}
