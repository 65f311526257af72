package writeback

import (
	"context"
	"time"

	"github.com/stratafs/strata/cache/index"
)

// Multipart uploads a crash left open. An eager upload (eager.go) records
// its upload's ID in the index, synced, once the backend has begun it, and
// removes the record once the upload is completed or aborted. A mount
// killed mid-write leaves the record behind: the next mount on the cache
// dir aborts those uploads (their parts are invisible in the bucket, and
// billed) and forgets them; one the backend cannot abort now is tried
// again at the mount after.

// recordParts records an eager upload of key begun as id.
func (m *Manager) recordParts(key, id string) (uint64, error) {
	return m.ix.AppendParts(index.PartsRecord{Source: m.source, Key: key, UploadID: id, Created: time.Now().UnixNano()})
}

// forgetParts removes an eager upload's record (nil manager, seq 0: none).
func (m *Manager) forgetParts(seq uint64) {
	if m == nil || seq == 0 {
		return
	}
	if err := m.ix.DeleteParts(seq); err != nil {
		m.log.Warn("writeback: could not forget a finished multipart upload; the next mount aborts it again", "err", err)
	}
}

type orphanParts struct {
	seq uint64
	rec index.PartsRecord
}

// findOrphanParts lists this source's recorded eager uploads: at New,
// before any upload of this mount is begun, every one is a crash's.
func (m *Manager) findOrphanParts() []orphanParts {
	var out []orphanParts
	err := m.ix.ScanParts(func(seq uint64, r index.PartsRecord, err error) error {
		switch {
		case err != nil:
			m.log.Error("writeback: unreadable multipart upload record; dropping it", "seq", seq, "err", err)
			_ = m.ix.DeleteParts(seq)
		case r.Source == m.source:
			out = append(out, orphanParts{seq, r})
		}
		return nil
	})
	if err != nil {
		m.log.Warn("writeback: could not list the multipart uploads a crash left open", "err", err)
	}
	return out
}

// abortOrphanParts aborts the uploads findOrphanParts found.
func (m *Manager) abortOrphanParts(ctx context.Context, orphans []orphanParts) {
	if m.pw == nil && len(orphans) > 0 {
		m.log.Warn("writeback: multipart uploads a crash left open, and this backend cannot abort them", "uploads", len(orphans))
		return
	}
	for _, o := range orphans {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		err := m.pw.AbortParts(actx, o.rec.Key, o.rec.UploadID)
		cancel()
		if err != nil {
			m.log.Warn("writeback: could not abort a multipart upload a crash left open; the next mount tries again", "key", o.rec.Key, "err", err)
			continue
		}
		m.forgetParts(o.seq)
		m.log.Info("writeback: aborted a multipart upload a crash left open", "key", o.rec.Key)
	}
}
