package index

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// MoveRecord is one journaled rename in the bucket: every object at From
// (every key under From when Prefix) goes to To, by copy then delete. It
// is written (and synced) before the first bucket call and removed after
// the last, so a rename cut short by a crash is finished by the next
// mount. Its sequence number is drawn with the uploads': an upload
// journaled before the move and still under From is moved with it.
type MoveRecord struct {
	Source  string
	From    string
	To      string
	Prefix  bool
	Created int64 // unix nanoseconds
}

func moveKey(seq uint64) []byte { return seqRecordKey('m', seq) }

// MarshalMove encodes a move record.
func MarshalMove(r MoveRecord) []byte {
	e := encoder{}
	e.uvarint(recordV1)
	e.str(r.Source)
	e.str(r.From)
	e.str(r.To)
	prefix := uint64(0)
	if r.Prefix {
		prefix = 1
	}
	e.uvarint(prefix)
	e.varint(r.Created)
	return e.b
}

// UnmarshalMove decodes what MarshalMove encoded.
func UnmarshalMove(b []byte) (MoveRecord, error) {
	d := decoder{b: b}
	d.version()
	var r MoveRecord
	r.Source, r.From, r.To = d.str(), d.str(), d.str()
	prefix := d.uvarint()
	r.Created = d.varint()
	if err := d.done(); err != nil {
		return MoveRecord{}, err
	}
	if prefix > 1 {
		return MoveRecord{}, ErrCorrupt
	}
	r.Prefix = prefix == 1
	return r, nil
}

// AppendMove journals r, synced, and returns its sequence number.
func (ix *Index) AppendMove(r MoveRecord) (uint64, error) {
	seq, err := ix.appendSynced('m', MarshalMove(r))
	if err != nil {
		return 0, fmt.Errorf("index: journal move %s: %w", r.From, err)
	}
	return seq, nil
}

// DeleteMove removes move seq (the rename is complete in the bucket).
func (ix *Index) DeleteMove(seq uint64) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Delete(moveKey(seq)) })
	if err != nil {
		return fmt.Errorf("index: journal delete move %d: %w", seq, err)
	}
	return nil
}

// ScanMoves calls fn for every journaled move in sequence order. Entries
// that fail to decode are passed with err set.
func (ix *Index) ScanMoves(fn func(seq uint64, r MoveRecord, err error) error) error {
	err := ix.scanSeq('m', func(seq uint64, item *badger.Item) error {
		var r MoveRecord
		verr := item.Value(func(v []byte) (err error) { r, err = UnmarshalMove(v); return })
		return fn(seq, r, verr)
	})
	if err != nil {
		return fmt.Errorf("index: scan moves: %w", err)
	}
	return nil
}
