package index

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// NamedEntry is one entry of a listing.
type NamedEntry struct {
	Name  string
	Entry EntryRecord
}

func dirKey(tag SrcTag, dir string) []byte { return key('d', tag[:], []byte(dir)) }

func entryPrefix(tag SrcTag, dir string) []byte { return key('e', tag[:], []byte(dir), []byte{0}) }

func statKey(tag SrcTag, k string) []byte { return key('s', tag[:], []byte(k)) }

// GetDir returns the header of the cached listing of dir.
func (ix *Index) GetDir(tag SrcTag, dir string) (DirRecord, bool, error) {
	var rec DirRecord
	found, err := ix.get(dirKey(tag, dir), func(v []byte) (err error) { rec, err = UnmarshalDir(v); return })
	if err != nil {
		return rec, false, fmt.Errorf("index: dir %q: %w", dir, err)
	}
	return rec, found, nil
}

// ScanListing calls fn for each cached entry of dir, in name order.
func (ix *Index) ScanListing(tag SrcTag, dir string, fn func(name string, e EntryRecord) error) error {
	return ix.scanEntries(tag, dir, "", 0, fn)
}

// scanEntries calls fn for up to limit (0: all) entries of dir whose
// names sort after after, in name order.
func (ix *Index) scanEntries(tag SrcTag, dir, after string, limit int, fn func(name string, e EntryRecord) error) error {
	prefix := entryPrefix(tag, dir)
	so := scanOpts{limit: limit}
	if after != "" {
		so.from = append(append(append([]byte{}, prefix...), after...), 0)
	}
	err := ix.scan(prefix, so, func(item *badger.Item) error {
		name := string(item.Key()[len(prefix):])
		var e EntryRecord
		if err := item.Value(func(v []byte) (err error) { e, err = UnmarshalEntry(v); return }); err != nil {
			return err
		}
		return fn(name, e)
	})
	if err != nil {
		return fmt.Errorf("index: scan listing %q: %w", dir, err)
	}
	return nil
}

// GetEntry returns one entry of the cached listing of dir.
func (ix *Index) GetEntry(tag SrcTag, dir, name string) (EntryRecord, bool, error) {
	var e EntryRecord
	k := append(entryPrefix(tag, dir), name...)
	found, err := ix.get(k, func(v []byte) (err error) { e, err = UnmarshalEntry(v); return })
	if err != nil {
		return e, false, fmt.Errorf("index: entry %q in %q: %w", name, dir, err)
	}
	return e, found, nil
}

// ReplaceListing makes entries the cached listing of dir and hdr its
// header. Only the difference with what is stored is written. The header
// is marked incomplete while entries change, so a crash in between leaves
// a listing that is refetched rather than trusted.
func (ix *Index) ReplaceListing(tag SrcTag, dir string, hdr DirRecord, entries []NamedEntry) error {
	want := make(map[string][]byte, len(entries))
	for _, e := range entries {
		want[e.Name] = MarshalEntry(e.Entry)
	}
	prefix := entryPrefix(tag, dir)
	var dels [][]byte
	err := ix.scan(prefix, scanOpts{}, func(item *badger.Item) error {
		name := string(item.Key()[len(prefix):])
		v, ok := want[name]
		if !ok {
			dels = append(dels, item.KeyCopy(nil))
			return nil
		}
		same := false
		_ = item.Value(func(old []byte) error { same = bytes.Equal(old, v); return nil })
		if same {
			delete(want, name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index: replace listing %q: %w", dir, err)
	}
	if len(dels) > 0 || len(want) > 0 {
		if err := ix.setDir(tag, dir, DirRecord{FetchedAt: hdr.FetchedAt, Entries: hdr.Entries}); err != nil {
			return err
		}
		wb := ix.db.NewWriteBatch()
		defer wb.Cancel()
		for _, k := range dels {
			if err := wb.Delete(k); err != nil {
				return fmt.Errorf("index: replace listing %q: %w", dir, err)
			}
		}
		for name, v := range want {
			if err := wb.Set(append(entryPrefix(tag, dir), name...), v); err != nil {
				return fmt.Errorf("index: replace listing %q: %w", dir, err)
			}
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("index: replace listing %q: %w", dir, err)
		}
	}
	return ix.setDir(tag, dir, hdr)
}

// DeleteListing forgets the cached listing of dir: entries and header.
func (ix *Index) DeleteListing(tag SrcTag, dir string) error {
	if err := ix.ReplaceListing(tag, dir, DirRecord{}, nil); err != nil {
		return err
	}
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Delete(dirKey(tag, dir)) })
	if err != nil {
		return fmt.Errorf("index: delete listing %q: %w", dir, err)
	}
	return nil
}

func (ix *Index) setDir(tag SrcTag, dir string, hdr DirRecord) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(dirKey(tag, dir), MarshalDir(hdr)) })
	if err != nil {
		return fmt.Errorf("index: dir header %q: %w", dir, err)
	}
	return nil
}

// GetStat returns the cached point lookup of key.
func (ix *Index) GetStat(tag SrcTag, k string) (EntryRecord, bool, error) {
	var e EntryRecord
	found, err := ix.get(statKey(tag, k), func(v []byte) (err error) { e, err = UnmarshalEntry(v); return })
	if err != nil {
		return e, false, fmt.Errorf("index: stat %q: %w", k, err)
	}
	return e, found, nil
}

// PutStat caches the point lookup of key.
func (ix *Index) PutStat(tag SrcTag, k string, e EntryRecord) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(statKey(tag, k), MarshalEntry(e)) })
	if err != nil {
		return fmt.Errorf("index: put stat %q: %w", k, err)
	}
	return nil
}

// DeleteStat forgets the cached point lookup of key.
func (ix *Index) DeleteStat(tag SrcTag, k string) error {
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Delete(statKey(tag, k)) })
	if err != nil {
		return fmt.Errorf("index: delete stat %q: %w", k, err)
	}
	return nil
}

// get reads one value; a missing key is (false, nil).
func (ix *Index) get(k []byte, decode func(v []byte) error) (bool, error) {
	err := ix.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		return item.Value(decode)
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ScanListingFrom calls fn for up to limit entries of dir whose names sort
// after after ("" starts at the beginning), in name order. Readers of
// listings too big to keep in memory page through them with it.
func (ix *Index) ScanListingFrom(tag SrcTag, dir, after string, limit int, fn func(name string, e EntryRecord) error) error {
	if limit <= 0 {
		return nil
	}
	return ix.scanEntries(tag, dir, after, limit, fn)
}

// PutEntry adds or replaces one entry of dir's cached listing.
func (ix *Index) PutEntry(tag SrcTag, dir, name string, e EntryRecord) error {
	k := append(entryPrefix(tag, dir), name...)
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(k, MarshalEntry(e)) })
	if err != nil {
		return fmt.Errorf("index: put entry %q in %q: %w", name, dir, err)
	}
	return nil
}

// DeleteEntry removes one entry of dir's cached listing.
func (ix *Index) DeleteEntry(tag SrcTag, dir, name string) error {
	k := append(entryPrefix(tag, dir), name...)
	err := ix.db.Update(func(txn *badger.Txn) error { return txn.Delete(k) })
	if err != nil {
		return fmt.Errorf("index: delete entry %q in %q: %w", name, dir, err)
	}
	return nil
}

// DeleteStatsUnder forgets every point lookup of a key under prefix.
func (ix *Index) DeleteStatsUnder(tag SrcTag, prefix string) error {
	p := statKey(tag, prefix)
	var keys [][]byte
	err := ix.scan(p, scanOpts{keysOnly: true}, func(item *badger.Item) error {
		keys = append(keys, item.KeyCopy(nil))
		return nil
	})
	if err != nil {
		return fmt.Errorf("index: stats under %q: %w", prefix, err)
	}
	wb := ix.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	return wb.Flush()
}

// DirsUnder returns every directory at or under prefix that has a cached
// listing.
func (ix *Index) DirsUnder(tag SrcTag, prefix string) ([]string, error) {
	p := dirKey(tag, prefix)
	skip := len(dirKey(tag, ""))
	var dirs []string
	err := ix.scan(p, scanOpts{keysOnly: true}, func(item *badger.Item) error {
		dirs = append(dirs, string(item.Key()[skip:]))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index: listings under %q: %w", prefix, err)
	}
	return dirs, nil
}
