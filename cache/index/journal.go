package index

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// UploadState is where a journaled upload stands.
type UploadState uint8

const (
	UploadPending UploadState = iota // waiting for (or in) an upload
	UploadFailed                     // gave up for now: a permanent error; data kept
	// UploadOvertaken: the file was deleted while an attempt of this
	// upload was in flight, which may still land: nothing to upload, but
	// a next mount (after a kill -9) takes the key's object down if it
	// holds exactly the staged bytes, or, once the version that landed is
	// known (ThenDelete is the key, ThenDeleteVersion that version: a
	// take-down that failed), if it is still at that version.
	UploadOvertaken
)

// UploadRecord is one journaled upload: a staged file that must reach the
// bucket as Key. It is written (and synced) before close() returns in
// async mode and removed only once the object is complete in the bucket.
type UploadRecord struct {
	Source      string
	Key         string
	Staging     string // file name in the staging directory
	Size        int64
	MTime       int64  // unix nanoseconds
	BaseVersion string // the version the writer started from ("" none, "\x00absent" new)
	// ThenDelete is a key removed once the upload is complete (a renamed
	// file's old name), if it still has version ThenDeleteVersion.
	ThenDelete        string
	ThenDeleteVersion string
	State             UploadState
	Attempts          uint32
	LastError         string
	Created           int64 // unix nanoseconds
	// UnsyncedBoot is the boot of the machine (its boot ID) on which the
	// staged file was journaled without being flushed to disk (sync mode:
	// close waits for the upload instead), "" once it is flushed. After a
	// reboot such bytes may be torn and are not uploaded.
	UnsyncedBoot string
	// Follows: BaseVersion was taken from the key's previous upload, still
	// pending when this one was committed (a rewrite of a file whose
	// upload had not landed). When that upload lands, this one becomes
	// conditional on the version it created instead.
	Follows bool
	// StagedMTime is, for a file the kernel writes straight into its
	// staging file (FUSE passthrough writes), the staged file's
	// modification time when its last acknowledged close was journaled
	// (unix nanoseconds; 0 for every other upload). The file may be
	// written again after that close; a restart that finds it changed
	// does not upload it.
	StagedMTime int64
}

// The journal holds uploads ('u') and renames ('m', moves.go), each
// keyed by kind and a sequence number drawn from one counter, so that
// the two kinds order against each other.
func seqRecordKey(kind byte, seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return key(kind, b[:])
}

func uploadKey(seq uint64) []byte { return seqRecordKey('u', seq) }

// appendSynced stores v under a new sequence number of kind, synced to
// disk before it returns.
func (ix *Index) appendSynced(kind byte, v []byte) (uint64, error) {
	seq, err := ix.nextSeq()
	if err != nil {
		return 0, err
	}
	if err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(seqRecordKey(kind, seq), v) }); err != nil {
		return 0, err
	}
	if err := ix.db.Sync(); err != nil {
		return 0, fmt.Errorf("index: sync journal: %w", err)
	}
	return seq, nil
}

// scanSeq calls fn with every record of kind, in sequence order.
func (ix *Index) scanSeq(kind byte, fn func(seq uint64, item *badger.Item) error) error {
	return ix.scan([]byte{kind}, scanOpts{}, func(item *badger.Item) error {
		k := item.Key()
		if len(k) != 9 {
			return nil
		}
		return fn(binary.BigEndian.Uint64(k[1:]), item)
	})
}

// MarshalUpload encodes an upload record.
func MarshalUpload(r UploadRecord) []byte {
	e := encoder{}
	e.uvarint(recordV1)
	for _, s := range []string{r.Source, r.Key, r.Staging, r.BaseVersion, r.ThenDelete, r.ThenDeleteVersion, r.LastError} {
		e.str(s)
	}
	e.varint(r.Size)
	e.varint(r.MTime)
	e.uvarint(uint64(r.State))
	e.uvarint(uint64(r.Attempts))
	e.varint(r.Created)
	if r.UnsyncedBoot != "" || r.Follows || r.StagedMTime != 0 { // optional trailing fields: older records end before them
		e.str(r.UnsyncedBoot)
		e.uvarint(boolUint(r.Follows))
		if r.StagedMTime != 0 {
			e.varint(r.StagedMTime)
		}
	}
	return e.b
}

func boolUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// UnmarshalUpload decodes what MarshalUpload encoded.
func UnmarshalUpload(b []byte) (UploadRecord, error) {
	d := decoder{b: b}
	d.version()
	var r UploadRecord
	for _, p := range []*string{&r.Source, &r.Key, &r.Staging, &r.BaseVersion, &r.ThenDelete, &r.ThenDeleteVersion, &r.LastError} {
		*p = d.str()
	}
	r.Size, r.MTime = d.varint(), d.varint()
	state, attempts := d.uvarint(), d.uvarint()
	r.Created = d.varint()
	if d.err == nil && len(d.b) > 0 {
		r.UnsyncedBoot = d.str()
		follows := d.uvarint()
		if follows > 1 {
			return UploadRecord{}, ErrCorrupt
		}
		r.Follows = follows == 1
		if d.err == nil && len(d.b) > 0 {
			r.StagedMTime = d.varint()
		}
	}
	if err := d.done(); err != nil {
		return UploadRecord{}, err
	}
	if state > uint64(UploadOvertaken) || attempts > 1<<32-1 || r.Size < 0 {
		return UploadRecord{}, ErrCorrupt
	}
	r.State, r.Attempts = UploadState(state), uint32(attempts)
	return r, nil
}

// AppendUpload journals r and returns its sequence number. The journal is
// synced to disk before it returns: an acknowledged close survives a
// crash of the machine, not only of the process.
func (ix *Index) AppendUpload(r UploadRecord) (uint64, error) {
	seq, err := ix.appendSynced('u', MarshalUpload(r))
	if err != nil {
		return 0, fmt.Errorf("index: journal %s: %w", r.Key, err)
	}
	return seq, nil
}

// PutUpload rewrites journal entry seq.
func (ix *Index) PutUpload(seq uint64, r UploadRecord) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(uploadKey(seq), MarshalUpload(r)) })
	if err != nil {
		return fmt.Errorf("index: journal %s: %w", r.Key, err)
	}
	return nil
}

// DeleteUpload removes journal entry seq (its upload is complete).
func (ix *Index) DeleteUpload(seq uint64) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Delete(uploadKey(seq)) })
	if err != nil {
		return fmt.Errorf("index: journal delete %d: %w", seq, err)
	}
	return nil
}

// ScanUploads calls fn for every journaled upload in sequence order.
// Entries that fail to decode are passed with err set.
func (ix *Index) ScanUploads(fn func(seq uint64, r UploadRecord, err error) error) error {
	err := ix.scanSeq('u', func(seq uint64, item *badger.Item) error {
		var r UploadRecord
		verr := item.Value(func(v []byte) (err error) { r, err = UnmarshalUpload(v); return })
		return fn(seq, r, verr)
	})
	if err != nil {
		return fmt.Errorf("index: scan journal: %w", err)
	}
	return nil
}

var seqKey = []byte("!seq")

// nextSeq returns a number larger than any returned before, across
// restarts.
func (ix *Index) nextSeq() (uint64, error) {
	ix.seqMu.Lock()
	defer ix.seqMu.Unlock()
	var seq uint64
	err := ix.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(seqKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := item.Value(func(v []byte) error {
				if len(v) != 8 {
					return ErrCorrupt
				}
				seq = binary.BigEndian.Uint64(v)
				return nil
			}); err != nil {
				return err
			}
		}
		seq++
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], seq)
		return txn.Set(seqKey, b[:])
	})
	if err != nil {
		return 0, fmt.Errorf("index: sequence: %w", err)
	}
	return seq, nil
}
