package writeback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// A rename changes the bucket in several calls (a copy and a delete per
// object). It is journaled first (BeginMove) and the record removed when
// the caller is done (Move.Done), so that a rename cut short by a crash is
// finished by the next mount rather than left half-done: restore moves
// the journaled uploads still under the old name, and the dispatcher
// copies and deletes what the bucket still holds under it before any
// upload starts (an upload to the new name must land after the copy of
// the older object it replaces).

// Move is a journaled rename in progress.
type Move struct {
	m   *Manager
	seq uint64
	to  string // a file's new key ("" for a directory's prefix)
}

// BeginMove journals the rename of from to to (every key under from, when
// prefix) before the caller changes the bucket. The caller moves the
// pending uploads (Rekey) and the bucket's objects, then calls Done.
func (m *Manager) BeginMove(from, to string, prefix bool) (*Move, error) {
	seq, err := m.ix.AppendMove(index.MoveRecord{Source: m.source, From: from, To: to, Prefix: prefix, Created: time.Now().UnixNano()})
	if err != nil {
		return nil, fmt.Errorf("writeback: journal rename %s: %w", from, err)
	}
	mv := &Move{m: m, seq: seq}
	if !prefix {
		// An upload of to overtaken by this rename leaves its object for
		// the renamed file to replace (replacedLocked).
		mv.to = to
		m.mu.Lock()
		m.moving[to]++
		m.mu.Unlock()
	}
	return mv, nil
}

// Done ends the rename: the bucket holds its result, or the caller
// reported its failure and the next mount must not redo it.
func (mv *Move) Done() {
	if mv.to != "" {
		mv.m.mu.Lock()
		if mv.m.moving[mv.to]--; mv.m.moving[mv.to] <= 0 {
			delete(mv.m.moving, mv.to)
		}
		mv.m.mu.Unlock()
	}
	if err := mv.m.ix.DeleteMove(mv.seq); err != nil {
		mv.m.log.Error("writeback: removing a finished rename from the journal failed; the next mount repeats it", "err", err)
	}
}

// movedKey is key after move r, and whether r moves it.
func movedKey(r index.MoveRecord, key string) (string, bool) {
	switch {
	case r.Prefix && strings.HasPrefix(key, r.From):
		return r.To + strings.TrimPrefix(key, r.From), true
	case !r.Prefix && key == r.From:
		return r.To, true
	}
	return key, false
}

// applyMoves is key after every unfinished rename, in journal order. An
// upload journaled after the rename began is moved too: the rename had
// not returned, so the only way to it is a commit that raced the rename.
func (m *Manager) applyMoves(moves []journaledMove, key string) string {
	for _, mv := range moves {
		key, _ = movedKey(mv.rec, key)
	}
	return key
}

type journaledMove struct {
	seq uint64
	rec index.MoveRecord
}

// loadMoves returns this source's unfinished renames, oldest first.
func (m *Manager) loadMoves() []journaledMove {
	var out []journaledMove
	err := m.ix.ScanMoves(func(seq uint64, r index.MoveRecord, err error) error {
		switch {
		case err != nil:
			m.log.Error("writeback: unreadable rename in the journal; dropping it", "seq", seq, "err", err)
			_ = m.ix.DeleteMove(seq)
		case r.Source == m.source:
			out = append(out, journaledMove{seq, r})
		}
		return nil
	})
	if err != nil {
		m.log.Error("writeback: reading unfinished renames", "err", err)
	}
	return out
}

// finishMoves completes the renames a crash cut short, oldest first,
// retrying until the backend answers or the manager closes. It runs before
// the first upload starts.
func (m *Manager) finishMoves(moves []journaledMove) {
	for _, mv := range moves {
		for try := 0; ; try++ {
			err := m.finishMove(m.ctx, mv.rec)
			if err == nil {
				m.log.Info("writeback: finished a rename cut short by a restart", "from", mv.rec.From, "to", mv.rec.To)
				_ = m.ix.DeleteMove(mv.seq)
				break
			}
			if m.ctx.Err() != nil {
				return
			}
			pause := min(m.opts.RetryMin<<min(try, 20), m.opts.RetryMax)
			m.log.Warn("writeback: finishing a rename cut short by a restart; retrying", "from", mv.rec.From, "to", mv.rec.To, "in", pause, "err", err)
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(pause):
			}
		}
	}
}

// finishMove copies what the bucket still holds under r.From to r.To and
// deletes it: every copy first, then the deletes, as a live rename does.
func (m *Manager) finishMove(ctx context.Context, r index.MoveRecord) error {
	cp, ok := m.stat.(backend.Copier)
	if !ok || m.del == nil || m.stat == nil {
		return fmt.Errorf("writeback: finishing rename %s: %w", r.From, backend.ErrNotSupported)
	}
	var objs []backend.ObjectInfo
	if r.Prefix {
		var err error
		if objs, _, err = backend.ListAll(ctx, m.stat, r.From, 0); err != nil {
			return err
		}
	} else {
		info, err := m.stat.Stat(ctx, r.From)
		switch {
		case errors.Is(err, backend.ErrNotExist):
		case err != nil:
			return err
		default:
			objs = append(objs, info)
		}
	}
	for _, o := range objs {
		dst, _ := movedKey(r, o.Key)
		if _, err := cp.Copy(ctx, o.Key, o.Version, dst); err != nil && !errors.Is(err, backend.ErrNotExist) {
			return fmt.Errorf("writeback: rename copy %s: %w", o.Key, err)
		}
	}
	for _, o := range objs {
		if err := m.del.Delete(ctx, o.Key); err != nil && !errors.Is(err, backend.ErrNotExist) {
			return fmt.Errorf("writeback: rename delete %s: %w", o.Key, err)
		}
	}
	// A directory tree's (file://) old directory, which the listing shows
	// only while empty: its delete takes the emptied ones.
	if r.Prefix && backend.UnlistedMarker(objs, r.From) {
		if err := m.del.Delete(ctx, r.From); err != nil && !errors.Is(err, backend.ErrNotExist) {
			return fmt.Errorf("writeback: rename delete %s: %w", r.From, err)
		}
	}
	return nil
}
