package fs

import (
	"context"
	"sync"
	"time"
)

// lateReleaseWait bounds how long `strata sync` waits for the last
// RELEASE of a file whose publication waits for it (lateCommits): as long
// as the write path waits for a held upload's (writeback's
// heldReleaseWait), for the same reason, and within the same bound
// (Manager.WaitAllSince). A var for tests.
var lateReleaseWait = 2 * time.Second

// lateCommits are the files a close left dirty without publishing them:
// the closer wrote nothing new (`: > file`, an open(O_TRUNC) closed with
// no write; a file written by a process that has not closed it yet), so
// the file goes up at its last RELEASE (fileNode.release's late commit),
// which the kernel sends after close() has returned. Until then no upload
// exists for `strata sync` to wait for: sync waits for these first.
type lateCommits struct {
	mu      sync.Mutex
	nodes   map[*fileNode]struct{}
	changed chan struct{} // closed when a node leaves nodes (made by wait)
}

// expect records that n is published at its last release.
func (l *lateCommits) expect(n *fileNode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nodes == nil {
		l.nodes = map[*fileNode]struct{}{}
	}
	l.nodes[n] = struct{}{}
}

// done: n's last release has committed what it had (or had nothing to).
func (l *lateCommits) done(n *fileNode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.nodes[n]; !ok {
		return
	}
	delete(l.nodes, n)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// wait waits, until deadline at most, until every file expected when it
// was called is done. A file another descriptor really keeps open is not
// waited for longer: its upload is then reported pending, as a held one
// is.
func (l *lateCommits) wait(ctx context.Context, deadline time.Time) error {
	l.mu.Lock()
	var want []*fileNode
	for n := range l.nodes {
		want = append(want, n)
	}
	l.mu.Unlock()
	if len(want) == 0 {
		return nil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		l.mu.Lock()
		left := false
		for _, n := range want {
			if _, ok := l.nodes[n]; ok {
				left = true
				break
			}
		}
		if !left {
			l.mu.Unlock()
			return nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
