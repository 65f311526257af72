package writeback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratafs/strata/cache/index"
)

// Commit hands a finished staging file over for upload as key, based on
// version base (backend.VersionAbsent for a new file, "" for none). The
// staging handle is closed; the job owns the file. In async mode the
// data is made durable and journaled before Commit returns; in sync mode
// Commit uploads and returns the first attempt's result (a failed upload
// stays journaled and is retried in the background).
func (m *Manager) Commit(ctx context.Context, key string, st *Staging, base string, mtime int64) (*Job, error) {
	j, err := m.Register(key, st, base, mtime, false)
	if err != nil {
		return nil, err
	}
	return j, m.Journal(ctx, j)
}

// CommitHeld is Commit for a file still open elsewhere: in async mode the
// upload is journaled but waits for Unhold (the file's last close, or an
// fsync), so that a close of one descriptor while others still write
// publishes nothing; a newer commit of the key meanwhile supersedes it. A
// crash before Unhold uploads it at the next mount, as any journaled
// upload. In sync mode it is Commit.
func (m *Manager) CommitHeld(ctx context.Context, key string, st *Staging, base string, mtime int64) (*Job, error) {
	j, err := m.Register(key, st, base, mtime, true)
	if err != nil {
		return nil, err
	}
	return j, m.Journal(ctx, j)
}

// Unhold lets key's held uploads start.
func (m *Manager) Unhold(key string) {
	m.mu.Lock()
	now := time.Now()
	for _, j := range m.byKey[key] {
		if j.held {
			m.unholdLocked(j, now)
		}
	}
	m.touchLocked(key, 0, now)
	m.mu.Unlock()
	m.kick()
}

// followLocked makes j, committed with no base version (a rewrite of a
// file this mount committed before), conditional on what the key's
// previous upload started from, or, once that one lands, on the version
// it created (finish): a rewrite never replaces an object another node
// put in between. A key with no upload pending keeps no base, and so does
// a rewrite after a conflict was reported (the previous upload failed):
// writing the file again is how a user overrides the other writer.
// Caller holds m.mu.
func (m *Manager) followLocked(j *Job) {
	js := m.byKey[j.rec.Key]
	for i := len(js) - 1; i >= 0; i-- {
		prev := js[i]
		if errors.Is(prev.dropped, errCancelled) {
			continue
		}
		if !prev.failed {
			j.rec.BaseVersion, j.rec.Follows = prev.rec.BaseVersion, true
			if prev.landed && prev.info.Version != "" { // in the bucket, settling
				j.rec.BaseVersion = prev.info.Version
			}
		}
		return
	}
}

// landedLocked passes the version an upload of key created on to the
// uploads that follow it. Caller holds m.mu.
func (m *Manager) landedLocked(r index.UploadRecord, version string) {
	for _, k := range m.byKey[r.Key] {
		if !k.rec.Follows || k.rec.BaseVersion != r.BaseVersion || k.running {
			continue
		}
		k.rec.BaseVersion = version
		if !k.journaling && k.seq != 0 { // a journaling one records it itself
			_ = m.putUpload(k.seq, k.rec)
		}
	}
}

// Register is the first half of a commit, with no disk I/O, so that the
// filesystem can call it under its node locks: from its return on, key
// reads as st's content (Content) and st belongs to the job. Journal does
// the rest. held (async mode only) keeps the upload for Unhold. A session
// with a failed write is refused (ErrFailedSession): it goes to Keep.
func (m *Manager) Register(key string, st *Staging, base string, mtime int64, held bool) (*Job, error) {
	if err := st.Failed(); err != nil {
		return nil, fmt.Errorf("writeback: %s: %w: %w", key, ErrFailedSession, err)
	}
	size := st.Size()
	c, err := dupContent(st.f, size, mtime)
	if err != nil {
		return nil, err
	}
	previous := st.Previous()
	name, reserved, eager := st.detach()
	r := index.UploadRecord{
		Source: m.source, Key: key, Staging: name, Size: size, MTime: mtime,
		BaseVersion: base, Created: time.Now().UnixNano(),
	}
	j := newJob(0, r, reserved)
	j.held = held && m.opts.Mode == Async
	j.content, j.journaling, j.eager = c, true, eager
	j.previous = previous
	m.mu.Lock()
	if base == "" {
		m.followLocked(j)
	}
	now := time.Now()
	if !j.held {
		j.released = now
	}
	ended := m.endSessionLocked(st, j, now)
	m.touchLocked(key, 0, now)
	m.byKey[key] = append(m.byKey[key], j)
	m.mu.Unlock()
	if ended && m.delayed() {
		m.kick() // the directory's held uploads count their delay from now
	}
	return j, nil
}

// Journal is the second half of a commit: the staged bytes are made
// durable (async mode) and journaled, and the job may start. A job that
// cannot be journaled is dropped and its error returned. In sync mode it
// waits for the first upload attempt and returns its result.
func (m *Manager) Journal(ctx context.Context, j *Job) error {
	m.mu.Lock()
	unflushed := m.opts.Mode == Sync && m.boot != "" // see boot.go
	if unflushed {
		j.rec.UnsyncedBoot = m.boot
	}
	r := j.rec
	c := j.content.Acquire() // nil if dropped meanwhile (see below)
	m.mu.Unlock()
	var err error
	if !unflushed && c != nil {
		if err = c.f.Sync(); err != nil {
			err = fmt.Errorf("writeback: fsync staging file: %w", err)
		}
	}
	c.Release()
	var seq uint64
	if err == nil {
		seq, err = m.appendUpload(r)
	}
	m.mu.Lock()
	j.seq, j.journaling = seq, false
	switch {
	case err == nil && m.closed:
		err = fmt.Errorf("writeback: commit %s: %w", r.Key, context.Canceled)
		j.dropped = err // stays journaled for the next mount; only forgotten here
		m.removeLocked(j)
		j.settle(err)
		m.mu.Unlock()
		return err
	case err != nil:
		j.dropped = err
		m.dropLocked(j)
		m.mu.Unlock()
		return err
	}
	m.jobs[j] = struct{}{}
	if j.dropped != nil { // deleted or superseded while journaling
		m.dropLocked(j)
		m.mu.Unlock()
		return nil
	}
	renamed := j.rec != r
	m.supersedeLocked(j.rec.Key)
	kept := m.forgetKeptLocked(j.rec.Key) // written again whole
	r = j.rec
	m.mu.Unlock()
	if renamed { // renamed while journaling
		_ = m.putUpload(seq, r)
	}
	kept.remove()
	m.kick()
	if m.opts.Mode == Async {
		return nil
	}
	select {
	case <-j.attempted:
		if errors.Is(j.firstErr, errSuperseded) {
			return m.waitSuccessor(ctx, j)
		}
		if j.firstErr != nil && unflushed {
			m.makeDurable(j) // close reports the error: the bytes are kept and retried
		}
		return j.firstErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitSuccessor waits for the first attempt of the commit that superseded
// j (following newer ones that superseded it in turn) and returns its
// result. A sync close whose upload was overtaken by another close of the
// same file (appenders closing one after the other) returns once the
// bytes it published are in the bucket, in the newer upload: that one was
// staged from them. It used to fail with EIO.
func (m *Manager) waitSuccessor(ctx context.Context, j *Job) error {
	for {
		m.mu.Lock()
		next := j.successor
		m.mu.Unlock()
		if next == nil { // dropped with no newer commit named (a discard)
			return j.firstErr
		}
		select {
		case <-next.attempted:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !errors.Is(next.firstErr, errSuperseded) {
			return next.firstErr
		}
		j = next
	}
}
