package shared

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/backend"
)

type jobKind int

const (
	jobPut     jobKind = iota // write the blocks as group `group`
	jobResolve                // blocks are a full-block prefix of the group: write it if the object ends there
	jobRepair                 // refetch the whole group from the origin and rewrite it
)

// job is one background write. blocks[i] is block FirstBlock(group)+i;
// each was taken from the writer's budget.
type job struct {
	kind         jobKind
	key, version string
	id           ID
	group        int64
	blocks       [][]byte
}

// writer fills the tier in the background from copies of origin blocks
// held within a byte budget. Nothing on the read path ever waits for it.
type writer struct {
	t     *Tier
	limit int64
	held  atomic.Int64
	pool  sync.Pool
	jobs  chan *job
	asm   *assembler // nil with one block per group
	stop  chan struct{}
	// stopped is set when close begins: blocks read after that are not
	// taken (the janitor is gone; nothing would sweep their groups).
	stopped atomic.Bool

	ctx    context.Context // cancelled when the drain deadline passes
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex // guards closed, the sends on jobs, repairing
	closed    bool
	repairing map[groupRef]bool
}

func newWriter(t *Tier) *writer {
	o := t.opts
	w := &writer{t: t, limit: o.WriteBuffer, stop: make(chan struct{}), repairing: map[groupRef]bool{}}
	// The byte budget (acquire) bounds what waits; the queue only needs
	// room for that many small blocks (a 128 KiB image is one job).
	w.jobs = make(chan *job, min(1<<16, max(64, int(o.WriteBuffer/512))))
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if t.layout.GroupBlocks > 1 {
		w.asm = &assembler{w: w, l: t.layout, idle: o.IdleFlush, now: time.Now, groups: map[groupRef]*partial{}}
		w.wg.Add(1)
		go w.janitor()
	}
	for range o.WriteConcurrency {
		w.wg.Add(1)
		go w.work()
	}
	return w
}

// acquire returns a buffer of n bytes (at most a block) from the budget,
// or nil (counted as a dropped write) when the tier should not or cannot
// take the block. The budget counts what the buffers really hold: a small
// object's block takes its own size, not a whole block's.
func (w *writer) acquire(n int64) []byte {
	if w == nil || w.stopped.Load() {
		if w != nil {
			w.t.stats.WritesDropped.Add(1)
		}
		return nil
	}
	return w.reserve(n)
}

// reserve is acquire for a job already queued: a repair runs while Close
// drains the queue, after new blocks are no longer taken.
func (w *writer) reserve(n int64) []byte {
	st := &w.t.stats
	full := w.t.layout.BlockSize
	if n >= full {
		n = full
	}
	if !w.t.brk.closed() {
		st.WritesDropped.Add(1)
		return nil
	}
	for {
		cur := w.held.Load()
		if cur+n > w.limit {
			st.WritesDropped.Add(1)
			return nil
		}
		if w.held.CompareAndSwap(cur, cur+n) {
			break
		}
	}
	st.WriteBufferBytes.Add(n)
	if n < full {
		return make([]byte, n)
	}
	if p, ok := w.pool.Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n)
}

// release returns buffers to the budget (whole blocks to the pool).
func (w *writer) release(bufs ...[]byte) {
	for _, b := range bufs {
		if b == nil {
			continue
		}
		b = b[:cap(b)]
		w.held.Add(-int64(len(b)))
		w.t.stats.WriteBufferBytes.Add(-int64(len(b)))
		if int64(len(b)) == w.t.layout.BlockSize {
			w.pool.Put(&b)
		}
	}
}

// drop releases a job's buffers, counting its blocks as dropped.
func (w *writer) drop(j *job) {
	n := 0
	for _, b := range j.blocks {
		if b != nil {
			n++
		}
	}
	w.t.stats.WritesDropped.Add(int64(n))
	w.release(j.blocks...)
}

// add hands over block b of (key, version), data being a buffer from
// acquire cut to the block's length.
func (w *writer) add(key, version string, id ID, b int64, data []byte) {
	if w.asm == nil {
		w.submit(&job{kind: jobPut, key: key, version: version, id: id, group: b, blocks: [][]byte{data}})
		return
	}
	if j := w.asm.add(key, version, id, b, data); j != nil {
		w.submit(j)
	}
}

// repair schedules a rewrite of group g (once at a time per group).
func (w *writer) repair(key, version string, id ID, g int64) {
	w.mu.Lock()
	ref := groupRef{id, g}
	if w.repairing[ref] || len(w.repairing) > 1024 {
		w.mu.Unlock()
		return
	}
	w.repairing[ref] = true
	w.mu.Unlock()
	w.submit(&job{kind: jobRepair, key: key, version: version, id: id, group: g})
}

// submit queues j, or drops it when the queue is full or closed.
func (w *writer) submit(j *job) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		select {
		case w.jobs <- j:
			return
		default:
		}
	}
	w.drop(j)
	if j.kind == jobRepair {
		delete(w.repairing, groupRef{j.id, j.group})
	}
}

func (w *writer) work() {
	defer w.wg.Done()
	for j := range w.jobs {
		w.run(j)
	}
}

// janitor resolves or drops groups that stopped growing.
func (w *writer) janitor() {
	defer w.wg.Done()
	t := time.NewTicker(max(w.asm.idle/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			for _, j := range w.asm.sweep(false) {
				w.submit(j)
			}
		}
	}
}

// close flushes what can still be written and waits for the queue to
// drain, at most DrainTimeout; writes still queued then are dropped.
func (w *writer) close() {
	w.stopped.Store(true)
	close(w.stop)
	if w.asm != nil {
		for _, j := range w.asm.sweep(true) {
			w.submit(j)
		}
	}
	w.mu.Lock()
	w.closed = true
	close(w.jobs)
	w.mu.Unlock()
	timer := time.AfterFunc(w.t.opts.DrainTimeout, w.cancel)
	w.wg.Wait()
	timer.Stop()
	w.cancel()
}

// run executes one job.
func (w *writer) run(j *job) {
	if j.kind == jobRepair {
		defer func() {
			w.mu.Lock()
			delete(w.repairing, groupRef{j.id, j.group})
			w.mu.Unlock()
		}()
	}
	if w.ctx.Err() != nil || !w.t.brk.closed() {
		w.drop(j)
		return
	}
	var err error
	switch j.kind {
	case jobResolve:
		err = w.resolve(j)
	case jobRepair:
		err = w.refetch(j)
	}
	if err != nil {
		w.t.log.Debug("shared: not writing group", "key", j.key, "group", j.group, "err", err)
		w.drop(j)
		return
	}
	w.put(j)
}

// errNotEnd: an incomplete group does not end where its object does.
var errNotEnd = errors.New("shared: group does not end at the object's end")

// resolve checks with one origin Stat that a full-block prefix of a group
// ends where the object does, which makes it the whole group.
func (w *writer) resolve(j *job) error {
	info, err := w.originStat(j)
	if err != nil {
		return err
	}
	end := (w.t.layout.FirstBlock(j.group) + int64(len(j.blocks))) * w.t.layout.BlockSize
	if info.Size != end {
		return fmt.Errorf("%w: ends at %d, object has %d bytes", errNotEnd, end, info.Size)
	}
	return nil
}

func (w *writer) originStat(j *job) (backend.ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(w.ctx, w.t.opts.WriteTimeout)
	defer cancel()
	info, err := w.t.origin.Stat(ctx, j.key)
	if err == nil && info.Version != j.version {
		err = fmt.Errorf("shared: stat %s: %w", j.key, backend.ErrVersionChanged)
	}
	return info, err
}

// refetch reads group j.group whole from the origin into j.blocks.
func (w *writer) refetch(j *job) error {
	info, err := w.originStat(j)
	if err != nil {
		return err
	}
	l := w.t.layout
	first := l.FirstBlock(j.group)
	last := min(first+l.GroupBlocks, (info.Size+l.BlockSize-1)/l.BlockSize) - 1
	if last < first {
		return fmt.Errorf("shared: repair %s group %d: %w", j.key, j.group, io.ErrUnexpectedEOF)
	}
	for b := first; b <= last; b++ {
		buf := w.reserve(min(l.BlockSize, info.Size-b*l.BlockSize))
		if buf == nil {
			return fmt.Errorf("shared: repair %s group %d: no write buffer", j.key, j.group)
		}
		j.blocks = append(j.blocks, buf[:min(l.BlockSize, info.Size-b*l.BlockSize)])
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.t.opts.WriteTimeout)
	defer cancel()
	start := time.Now()
	body, err := w.t.origin.ReadRange(ctx, j.key, j.version, first*l.BlockSize, min(info.Size, (last+1)*l.BlockSize)-first*l.BlockSize)
	w.t.stats.Origin.Requests.Add(1)
	w.t.stats.Origin.Latency.Observe(time.Since(start))
	if err != nil {
		w.t.stats.Origin.Errors.Add(1)
		return err
	}
	defer body.Close()
	for _, b := range j.blocks {
		n, err := io.ReadFull(body, b)
		w.t.stats.Origin.Bytes.Add(int64(n))
		if err != nil {
			return fmt.Errorf("shared: repair %s group %d: %w", j.key, j.group, err)
		}
	}
	w.t.stats.Repairs.Add(1)
	return nil
}

// put writes a group's records as one shared object.
func (w *writer) put(j *job) {
	defer w.release(j.blocks...)
	r := newRecordsReader(w.t.seal, j.id, w.t.layout, w.t.layout.FirstBlock(j.group), j.blocks)
	ctx, cancel := context.WithTimeout(w.ctx, w.t.opts.WriteTimeout)
	defer cancel()
	name := w.t.keys.Object(j.id, j.group)
	_, err := w.t.store.Put(ctx, name, r, r.size, backend.PutOptions{})
	switch {
	case err == nil:
		w.t.brk.success(false)
		w.t.stats.Writes.Add(1)
		w.t.stats.WriteBytes.Add(r.size)
	case w.ctx.Err() != nil:
		w.t.stats.WritesDropped.Add(int64(len(j.blocks)))
	default:
		w.t.stats.WriteErrors.Add(1)
		// A tier that is out of reach or overloaded gets a rest; one that
		// refuses writes (permissions, quota) may still serve reads.
		if errors.Is(err, backend.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			w.t.brk.failure(false, err)
		}
		w.t.logOnce("write:"+errorKind(err), "shared: writing to the shared cache failed (further failures are counted, not logged)",
			"object", name, "err", err)
	}
}
