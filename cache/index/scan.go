package index

import "github.com/dgraph-io/badger/v4"

// scanOpts narrow a prefix scan. The zero value visits every key under
// the prefix with its value prefetched.
type scanOpts struct {
	from     []byte // first key to visit; nil: the first key under the prefix
	limit    int    // visit at most this many keys; 0: no limit
	keysOnly bool   // the caller reads keys only: do not prefetch values
}

// scan calls fn for every key under prefix, in key order, inside one read
// transaction: what fn sees is one consistent snapshot. The item is valid
// only during the call (copy what is kept: KeyCopy, ValueCopy). An error
// from fn ends the scan and is returned unwrapped. Every prefix iteration of the index goes through
// here so the badger iterator rules (Close, Prefix, prefetch) live once.
func (ix *Index) scan(prefix []byte, so scanOpts, fn func(item *badger.Item) error) error {
	return ix.db.View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.Prefix = prefix
		opt.PrefetchValues = !so.keysOnly
		if so.limit > 0 {
			opt.PrefetchSize = min(so.limit, opt.PrefetchSize)
		}
		it := txn.NewIterator(opt)
		defer it.Close()
		start := so.from
		if start == nil {
			start = prefix
		}
		n := 0
		for it.Seek(start); it.Valid(); it.Next() {
			if so.limit > 0 && n == so.limit {
				return nil
			}
			n++
			if err := fn(it.Item()); err != nil {
				return err
			}
		}
		return nil
	})
}
