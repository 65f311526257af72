package prefetch

import (
	"container/list"
	"sync"
)

// Priority orders fetches. Lower runs first.
type Priority int

const (
	Demand     Priority = iota // a reader is waiting
	Readahead                  // predicted from the reader's pattern
	Background                 // warming: nobody asked yet
	numPriorities
)

func (p Priority) String() string {
	return [...]string{"demand", "readahead", "background"}[p]
}

// scheduler starts queued tasks by priority within concurrency limits:
// readahead while fewer than limit fetches run, background while fewer
// than limit/2, demand while fewer than limit+demandExtra, so a reader is
// never queued behind prefetching.
type scheduler struct {
	limit       int
	demandExtra int
	start       func(*task) // runs the task (in its own goroutine)

	mu      sync.Mutex
	queues  [numPriorities]*list.List
	running int
	closed  bool
}

func newScheduler(limit int, start func(*task)) *scheduler {
	s := &scheduler{limit: max(limit, 1), demandExtra: max(limit/2, 4), start: start}
	for i := range s.queues {
		s.queues[i] = list.New()
	}
	return s
}

func (s *scheduler) capFor(p Priority) int {
	switch p {
	case Demand:
		return s.limit + s.demandExtra
	case Readahead:
		return s.limit
	}
	return max(s.limit/2, 1)
}

// enqueue queues t and starts whatever may run.
func (s *scheduler) enqueue(t *task) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		t.abort(errClosed)
		return
	}
	t.elem = s.queues[t.priority()].PushBack(t)
	s.dispatchLocked()
}

// promote moves a queued task to a higher priority. It does nothing for
// a task already running.
func (s *scheduler) promote(t *task, p Priority) {
	s.mu.Lock()
	if t.elem == nil || p >= t.priority() {
		s.mu.Unlock()
		return
	}
	s.queues[t.priority()].Remove(t.elem)
	t.prio.Store(int32(p))
	t.elem = s.queues[p].PushBack(t)
	s.dispatchLocked()
}

// done is called when a task finishes.
func (s *scheduler) done() {
	s.mu.Lock()
	s.running--
	s.dispatchLocked()
}

// dispatchLocked starts runnable tasks, then unlocks s.mu.
func (s *scheduler) dispatchLocked() {
	var ready []*task
	for p := Demand; p < numPriorities; p++ {
		q := s.queues[p]
		for q.Len() > 0 && s.running < s.capFor(p) {
			t := q.Remove(q.Front()).(*task)
			t.elem = nil
			s.running++
			ready = append(ready, t)
		}
		if q.Len() > 0 {
			break // lower priorities wait for this one
		}
	}
	s.mu.Unlock()
	for _, t := range ready {
		go s.start(t)
	}
}

// close aborts queued tasks; running ones finish on their own.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	var queued []*task
	for _, q := range s.queues {
		for e := q.Front(); e != nil; e = e.Next() {
			queued = append(queued, e.Value.(*task))
		}
		q.Init()
	}
	s.mu.Unlock()
	for _, t := range queued {
		t.elem = nil
		t.abort(errClosed)
	}
}

// queued returns how many tasks wait at each priority.
func (s *scheduler) queued() (n [numPriorities]int, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.queues {
		n[i] = q.Len()
	}
	return n, s.running
}
