package writeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
)

// An eager upload sends a file's parts while it is still being written
// (sync mode, backends with backend.PartWriter), so that a checkpoint's
// close waits for its last part and the completion only, instead of
// uploading the whole file after it was written.
//
// Nothing it sends is visible in the bucket before Complete, which only
// the file's upload job calls, after its commit, with the committed size:
// a file that is never committed (a failed write, a killed writer, an
// unlinked file) is aborted and leaves nothing. Parts are speculative: a
// part is sent once the writer has moved past its end, and every write or
// truncation that touches a part after that marks it for sending again
// (a per-part generation, taken before the part is read), so the object
// holds exactly the committed bytes however the file was written.
var (
	// eagerPartSize is the part size (S3 needs 5 MiB but for the last).
	// A variable for the tests.
	eagerPartSize int64 = 16 << 20
	// eagerStart: a file is sent in parts once this much of it is written
	// in order; smaller files go up whole when they are committed.
	eagerStart = 2 * eagerPartSize
)

// eagerMaxParts: a larger file (140 GiB) goes up whole at commit.
const eagerMaxParts = 9000

// errNoEager: the eager upload cannot complete the file; upload it whole.
var errNoEager = errors.New("writeback: no eager upload")

type eagerUpload struct {
	pw   backend.PartWriter
	key  string
	f    *os.File // our own descriptor on the staging file
	conc int

	ctx    context.Context // cancelled by abort
	cancel context.CancelFunc

	mu       sync.Mutex
	idle     *sync.Cond // signalled when a send or the begin ends
	up       backend.PartUpload
	begun    bool  // BeginParts called
	failed   error // the upload gave up: the file goes up whole
	frontier int64 // bytes [0, frontier) written, in order
	gen      []uint64
	sent     []sentPart
	inflight int // sends and begin in progress
	next     int // the first part never sent: startLocked goes on from it
	finished bool
	parts    int // parts sent before the commit (for the log and tests)

	// journal records the upload's ID while it is open, so that one a
	// crash leaves open is aborted by the next mount (orphans.go); nil
	// when the eager upload is not tracked by a manager.
	journal  *Manager
	partsSeq uint64 // its record (0: none)

	closeOnce sync.Once
	onClose   func() // the manager forgets it
}

// trackEager records e until it is finished or aborted, so that Close
// can abort it.
func (m *Manager) trackEager(e *eagerUpload) {
	if e == nil {
		return
	}
	m.eagerMu.Lock()
	m.eagers[e] = struct{}{}
	m.eagerMu.Unlock()
	e.journal = m
	e.onClose = func() {
		m.eagerMu.Lock()
		delete(m.eagers, e)
		m.eagerMu.Unlock()
	}
}

type sentPart struct {
	tag string
	gen uint64
	n   int64
}

// newEager starts tracking a staging file for an eager upload of key;
// frontier is how much of it is already final (a copy of earlier content).
func newEager(ctx context.Context, pw backend.PartWriter, key string, f *os.File, frontier int64, conc int) *eagerUpload {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil // no eager upload; the file goes up whole
	}
	unix.CloseOnExec(fd)
	ctx, cancel := context.WithCancel(ctx)
	e := &eagerUpload{pw: pw, key: key, f: os.NewFile(uintptr(fd), f.Name()), conc: max(conc, 1),
		ctx: ctx, cancel: cancel, frontier: frontier}
	e.idle = sync.NewCond(&e.mu)
	return e
}

// growLocked makes room for part i. Caller holds e.mu.
func (e *eagerUpload) growLocked(i int) {
	for len(e.gen) <= i {
		e.gen = append(e.gen, 0)
		e.sent = append(e.sent, sentPart{})
	}
}

// touchLocked marks the parts [off, end) overlaps as changed. Caller
// holds e.mu.
func (e *eagerUpload) touchLocked(off, end int64) {
	if end <= off {
		return
	}
	last := (end - 1) / eagerPartSize
	if last >= eagerMaxParts {
		// Too large to send in parts of this size (or a write far past
		// the end): the file goes up whole, and nothing more is tracked.
		if e.failed == nil {
			e.failed = fmt.Errorf("%w: more than %d parts", errNoEager, eagerMaxParts)
		}
		return
	}
	e.growLocked(int(last))
	for i := off / eagerPartSize; i <= last; i++ {
		e.gen[i]++
	}
}

// wrote records a write of [off, end) (after its bytes are in the file)
// and sends the parts the writer has moved past.
func (e *eagerUpload) wrote(off, end int64) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.touchLocked(off, end)
	if off <= e.frontier && end > e.frontier {
		e.frontier = end
	}
	e.startLocked()
}

// truncated records a truncation to n bytes.
func (e *eagerUpload) truncated(n int64) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.touchLocked(n/eagerPartSize*eagerPartSize, max(n, e.frontier, int64(len(e.gen))*eagerPartSize))
	e.frontier = min(e.frontier, n)
}

// startLocked begins the upload, or sends ready parts, within the
// concurrency. Caller holds e.mu.
func (e *eagerUpload) startLocked() {
	if e.failed != nil || e.finished || e.frontier < eagerStart {
		return
	}
	if !e.begun {
		e.begun = true
		e.inflight++
		go e.begin()
		return
	}
	if e.up == nil {
		return // begin in progress; it starts the sends when done
	}
	ready := int(e.frontier / eagerPartSize)
	if ready > eagerMaxParts {
		e.failed = fmt.Errorf("%w: more than %d parts", errNoEager, eagerMaxParts)
		return
	}
	// Each write calls this: it looks at the parts not yet sent only, not
	// at every part of the file. A sent part written over again is sent
	// again by finish (its generation changed).
	e.growLocked(ready)
	for ; e.next < ready && e.inflight < e.conc; e.next++ {
		e.inflight++
		go e.send(e.next, e.gen[e.next])
	}
}

func (e *eagerUpload) begin() {
	up, err := e.pw.BeginParts(e.ctx, e.key)
	var seq uint64
	if err == nil && e.journal != nil {
		if seq, err = e.journal.recordParts(e.key, up.ID()); err != nil {
			up.Abort(context.WithoutCancel(e.ctx)) // unrecorded: not sent at all
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight--
	e.idle.Broadcast()
	if err != nil {
		e.failed = err
		return
	}
	e.up, e.partsSeq = up, seq
	e.startLocked()
}

// send uploads part i as it is now (gen was read before the bytes are).
func (e *eagerUpload) send(i int, gen uint64) {
	tag, err := e.up.SendPart(e.ctx, i+1, e.f, int64(i)*eagerPartSize, eagerPartSize)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight--
	e.idle.Broadcast()
	if err != nil {
		e.sent[i] = sentPart{}
		// A part changed while it was sent (a truncation under it makes
		// its read come up short) is stale, not the backend failing:
		// finish sends it again, as it does any part written over.
		if e.gen[i] != gen {
			e.startLocked()
		} else if e.failed == nil {
			e.failed = err
		}
		return
	}
	e.sent[i] = sentPart{tag: tag, gen: gen, n: eagerPartSize}
	e.parts++
	e.startLocked()
}

// finish completes the upload as the committed file of size bytes under
// ifVersion: the parts not sent, or changed since, are sent now. No more
// writes come (the file is committed). errNoEager (wrapped): nothing was
// completed and the upload is given up; upload the file whole.
func (e *eagerUpload) finish(ctx context.Context, stop <-chan struct{}, size int64, ifVersion string) (backend.ObjectInfo, int, error) {
	e.mu.Lock()
	e.finished = true
	for e.inflight > 0 {
		e.idle.Wait()
	}
	up, failed, early, seq := e.up, e.failed, e.parts, e.partsSeq
	n := int((size + eagerPartSize - 1) / eagerPartSize)
	var todo []int
	tags := make([]string, n)
	if up != nil && failed == nil && n <= eagerMaxParts {
		e.growLocked(n - 1)
		for i := range n {
			want := min(eagerPartSize, size-int64(i)*eagerPartSize)
			if s := e.sent[i]; s.tag != "" && s.gen == e.gen[i] && s.n == want {
				tags[i] = s.tag
			} else {
				todo = append(todo, i)
			}
		}
	}
	e.mu.Unlock()
	if errors.Is(failed, backend.ErrUnavailable) {
		return e.giveUp(failed)
	}
	if up == nil && failed == nil {
		e.abort()
		return backend.ObjectInfo{}, 0, errNoEager // never begun: a small file
	}
	// The file goes up whole; the parts are aborted beside that, not
	// before it: against an endpoint gone silent the abort waits out its
	// own minute (its record stays for the next mount if it fails).
	if up == nil || failed != nil || n > eagerMaxParts || size < eagerPartSize {
		e.abortAsync()
		return backend.ObjectInfo{}, 0, fmt.Errorf("%w: %v", errNoEager, failed)
	}
	sctx, cancel := backend.WithStop(ctx, stop)
	err := e.sendAll(sctx, up, todo, tags, size)
	cancel()
	if backend.Stopped(stop) { // before the completion only (see Manager.upload)
		e.abort()
		return backend.ObjectInfo{}, 0, backend.ErrStopped
	}
	if errors.Is(err, backend.ErrUnavailable) {
		return e.giveUp(err)
	}
	if err != nil {
		e.abortAsync()
		return backend.ObjectInfo{}, 0, fmt.Errorf("%w: %w", errNoEager, err)
	}
	info, err := up.Complete(ctx, tags, size, backend.CompleteOptions{IfVersion: ifVersion, Stop: stop})
	if err == nil {
		e.journal.forgetParts(seq)
	} else {
		e.drop(up, seq) // Complete aborted it; make sure before forgetting it
	}
	e.close()
	return info, early, err
}

// giveUp ends an upload whose parts met an unavailable backend: the job
// fails with err now and is retried whole later, rather than sending the
// whole file to the same silent endpoint at once (a close then took twice
// as long to fail), and the parts are aborted off the caller's path (the
// abort would wait out the same silence; its record stays for the next
// mount if it fails).
func (e *eagerUpload) giveUp(err error) (backend.ObjectInfo, int, error) {
	e.abortAsync()
	return backend.ObjectInfo{}, 0, err
}

// sendAll sends the parts in todo, conc at once.
func (e *eagerUpload) sendAll(ctx context.Context, up backend.PartUpload, todo []int, tags []string, size int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	sem := make(chan struct{}, e.conc)
	for _, i := range todo {
		sem <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			off := int64(i) * eagerPartSize
			tag, err := up.SendPart(ctx, i+1, e.f, off, min(eagerPartSize, size-off))
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			tags[i] = tag
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// abort gives the upload up: sends stop, its parts are removed.
func (e *eagerUpload) abort() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.finished = true
	e.cancel()
	for e.inflight > 0 {
		e.idle.Wait()
	}
	up, seq := e.up, e.partsSeq
	e.up = nil
	e.mu.Unlock()
	if up != nil {
		e.drop(up, seq)
	}
	e.close()
}

// drop aborts up, and forgets its record once the backend has: an abort
// that fails (the backend unreachable) leaves the record for the next
// mount to abort.
func (e *eagerUpload) drop(up backend.PartUpload, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if e.pw.AbortParts(ctx, e.key, up.ID()) == nil {
		e.journal.forgetParts(seq)
	}
}

// abortAsync is abort off the caller's path (it waits for sends and
// calls the backend; callers may hold locks).
func (e *eagerUpload) abortAsync() {
	if e != nil {
		go e.abort()
	}
}

func (e *eagerUpload) close() {
	e.closeOnce.Do(func() {
		e.cancel()
		e.f.Close()
		if e.onClose != nil {
			e.onClose()
		}
	})
}
