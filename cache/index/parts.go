package index

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// PartsRecord is a multipart upload begun before its file was committed
// (the write path's eager upload): written, synced, once the backend has
// begun the upload, and removed once it is completed or aborted, so that
// one a crash left open (its parts invisible in the bucket, and billed)
// is aborted by the next mount.
type PartsRecord struct {
	Source   string
	Key      string
	UploadID string
	Created  int64 // unix nanoseconds
}

// MarshalParts encodes a parts record.
func MarshalParts(r PartsRecord) []byte {
	e := encoder{}
	e.uvarint(recordV1)
	e.str(r.Source)
	e.str(r.Key)
	e.str(r.UploadID)
	e.varint(r.Created)
	return e.b
}

// UnmarshalParts decodes what MarshalParts encoded.
func UnmarshalParts(b []byte) (PartsRecord, error) {
	d := decoder{b: b}
	d.version()
	var r PartsRecord
	r.Source, r.Key, r.UploadID = d.str(), d.str(), d.str()
	r.Created = d.varint()
	if err := d.done(); err != nil {
		return PartsRecord{}, err
	}
	return r, nil
}

// AppendParts records r, synced, and returns its sequence number.
func (ix *Index) AppendParts(r PartsRecord) (uint64, error) {
	seq, err := ix.appendSynced('p', MarshalParts(r))
	if err != nil {
		return 0, fmt.Errorf("index: record multipart upload of %s: %w", r.Key, err)
	}
	return seq, nil
}

// DeleteParts removes parts record seq (its upload is completed or aborted).
func (ix *Index) DeleteParts(seq uint64) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Delete(seqRecordKey('p', seq)) })
	if err != nil {
		return fmt.Errorf("index: delete multipart upload record %d: %w", seq, err)
	}
	return nil
}

// ScanParts calls fn for every parts record in sequence order. Entries
// that fail to decode are passed with err set.
func (ix *Index) ScanParts(fn func(seq uint64, r PartsRecord, err error) error) error {
	err := ix.scanSeq('p', func(seq uint64, item *badger.Item) error {
		var r PartsRecord
		verr := item.Value(func(v []byte) (err error) { r, err = UnmarshalParts(v); return })
		return fn(seq, r, verr)
	})
	if err != nil {
		return fmt.Errorf("index: scan multipart upload records: %w", err)
	}
	return nil
}
