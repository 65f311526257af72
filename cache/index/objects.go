package index

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

func objectKey(id ID) []byte { return key('o', id[:]) }

func blockKey(id ID, idx int64) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(idx))
	return key('b', id[:], b[:])
}

func blockPrefix(id ID) []byte { return key('b', id[:]) }

// GetObject returns the record of id, if present.
func (ix *Index) GetObject(id ID) (ObjectRecord, bool, error) {
	var rec ObjectRecord
	err := ix.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(objectKey(id))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			var derr error
			rec, derr = UnmarshalObject(v)
			return derr
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return ObjectRecord{}, false, nil
	}
	if err != nil {
		return ObjectRecord{}, false, fmt.Errorf("index: get object %s: %w", id, err)
	}
	return rec, true, nil
}

// PutObject writes the record of id.
func (ix *Index) PutObject(id ID, rec ObjectRecord) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(objectKey(id), MarshalObject(rec)) })
	if err != nil {
		return fmt.Errorf("index: put object %s: %w", id, err)
	}
	return nil
}

// MarkBlock records block idx of id as present with its CRC and length.
// Callers write the block's bytes first: a block the index calls present
// is a block whose bytes were written.
func (ix *Index) MarkBlock(id ID, idx int64, bi BlockInfo) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(blockKey(id, idx), MarshalBlock(bi)) })
	if err != nil {
		return fmt.Errorf("index: mark block %s/%d: %w", id, idx, err)
	}
	return nil
}

// MarkBlocks records blocks 0..len(bis)-1 of id as present, in one batch
// (a file adopted whole).
func (ix *Index) MarkBlocks(id ID, bis []BlockInfo) error {
	wb := ix.db.NewWriteBatch()
	defer wb.Cancel()
	for i, bi := range bis {
		if err := wb.Set(blockKey(id, int64(i)), MarshalBlock(bi)); err != nil {
			return fmt.Errorf("index: mark blocks of %s: %w", id, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("index: mark blocks of %s: %w", id, err)
	}
	return nil
}

// Blocks calls fn for every present block of id, in block order.
func (ix *Index) Blocks(id ID, fn func(idx int64, bi BlockInfo) error) error {
	prefix := blockPrefix(id)
	err := ix.scan(prefix, scanOpts{}, func(item *badger.Item) error {
		k := item.Key()
		if len(k) != len(prefix)+4 {
			return ErrCorrupt
		}
		idx := int64(binary.BigEndian.Uint32(k[len(prefix):]))
		var bi BlockInfo
		if err := item.Value(func(v []byte) (err error) { bi, err = UnmarshalBlock(v); return }); err != nil {
			return err
		}
		return fn(idx, bi)
	})
	if err != nil {
		return fmt.Errorf("index: blocks of %s: %w", id, err)
	}
	return nil
}

// DropBlocks forgets the given blocks of id (before their bytes are
// punched out of the cache file).
func (ix *Index) DropBlocks(id ID, idxs []int64) error {
	wb := ix.db.NewWriteBatch()
	defer wb.Cancel()
	for _, i := range idxs {
		if err := wb.Delete(blockKey(id, i)); err != nil {
			return fmt.Errorf("index: drop blocks of %s: %w", id, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("index: drop blocks of %s: %w", id, err)
	}
	return nil
}

// DeleteObject forgets id and all its blocks; it returns the bytes the
// blocks held. Blocks go first, so a crash in between leaves a record
// with fewer blocks, never blocks the index vouches for without a record.
func (ix *Index) DeleteObject(id ID) (int64, error) {
	var idxs []int64
	var freed int64
	if err := ix.Blocks(id, func(idx int64, bi BlockInfo) error {
		idxs = append(idxs, idx)
		freed += int64(bi.Len)
		return nil
	}); err != nil {
		return 0, err
	}
	if err := ix.DropBlocks(id, idxs); err != nil {
		return 0, err
	}
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Delete(objectKey(id)) })
	if err != nil {
		return 0, fmt.Errorf("index: delete object %s: %w", id, err)
	}
	return freed, nil
}

// ScanObjects calls fn for every object record. Records that fail to
// decode are passed with err set so callers can drop them.
func (ix *Index) ScanObjects(fn func(id ID, rec ObjectRecord, err error) error) error {
	return ix.ScanObjectsPage(nil, 0, fn)
}

// ScanObjectsPage is ScanObjects over at most limit records (0: all),
// starting after the object after (nil: the first), so that a long walk
// holds neither one read transaction nor every record at once.
func (ix *Index) ScanObjectsPage(after *ID, limit int, fn func(id ID, rec ObjectRecord, err error) error) error {
	prefix := []byte{'o'}
	so := scanOpts{limit: limit}
	if after != nil {
		so.from = append(objectKey(*after), 0)
	}
	err := ix.scan(prefix, so, func(item *badger.Item) error {
		k := item.Key()
		if len(k) != 1+len(ID{}) {
			return nil
		}
		var id ID
		copy(id[:], k[1:])
		var rec ObjectRecord
		verr := item.Value(func(v []byte) (err error) { rec, err = UnmarshalObject(v); return })
		return fn(id, rec, verr)
	})
	if err != nil {
		return fmt.Errorf("index: scan objects: %w", err)
	}
	return nil
}

// ScanBlockUsage calls fn once per object id that has present blocks,
// with the number of blocks and their total bytes. It reads keys and
// their 8-byte values only, so it is fast even for millions of blocks.
func (ix *Index) ScanBlockUsage(fn func(id ID, blocks, bytes int64) error) error {
	var cur ID
	var have bool
	var nb, bytes int64
	flush := func() error {
		if have && nb > 0 {
			return fn(cur, nb, bytes)
		}
		return nil
	}
	err := ix.scan([]byte{'b'}, scanOpts{}, func(item *badger.Item) error {
		k := item.Key()
		if len(k) != 1+len(ID{})+4 {
			return nil
		}
		var id ID
		copy(id[:], k[1:1+len(id)])
		if !have || id != cur {
			if err := flush(); err != nil {
				return err
			}
			cur, have, nb, bytes = id, true, 0, 0
		}
		var bi BlockInfo
		if err := item.Value(func(v []byte) (err error) { bi, err = UnmarshalBlock(v); return }); err != nil {
			return nil // an undecodable block counts for nothing
		}
		nb++
		bytes += int64(bi.Len)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("index: scan block usage: %w", err)
	}
	return nil
}

// CurrentVersion returns the id of the version last recorded for key.
func (ix *Index) CurrentVersion(tag SrcTag, k string) (ID, bool, error) {
	var id ID
	err := ix.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key('k', tag[:], []byte(k)))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != len(id) {
				return ErrCorrupt
			}
			copy(id[:], v)
			return nil
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return id, false, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("index: current version of %q: %w", k, err)
	}
	return id, true, nil
}

// SetCurrentVersion records id as the version of key last opened.
func (ix *Index) SetCurrentVersion(tag SrcTag, k string, id ID) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(key('k', tag[:], []byte(k)), id[:]) })
	if err != nil {
		return fmt.Errorf("index: set current version of %q: %w", k, err)
	}
	return nil
}

// PutObjects writes many records in one batch.
func (ix *Index) PutObjects(recs map[ID]ObjectRecord) error {
	wb := ix.db.NewWriteBatch()
	defer wb.Cancel()
	for id, rec := range recs {
		if err := wb.Set(objectKey(id), MarshalObject(rec)); err != nil {
			return fmt.Errorf("index: put objects: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("index: put objects: %w", err)
	}
	return nil
}
