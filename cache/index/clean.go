package index

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// cleanKey marks a cache shut down cleanly: every present block was
// verified (or written) and is on disk. It is taken away when the cache
// is opened, so a run that ends any other way leaves none.
var cleanKey = []byte("!clean")

// MarkClean records a clean shutdown, synced to disk.
func (ix *Index) MarkClean() error {
	if err := ix.db.Update(func(txn *badger.Txn) error { return txn.Set(cleanKey, []byte{1}) }); err != nil {
		return fmt.Errorf("index: mark clean: %w", err)
	}
	if err := ix.db.Sync(); err != nil {
		return fmt.Errorf("index: mark clean: %w", err)
	}
	return nil
}

// TakeClean reports whether the last run shut down cleanly, and removes
// the mark (synced) so that a crash of this run is seen by the next.
func (ix *Index) TakeClean() (bool, error) {
	found := false
	err := ix.db.Update(func(txn *badger.Txn) error {
		_, err := txn.Get(cleanKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			return nil
		case err != nil:
			return err
		}
		found = true
		return txn.Delete(cleanKey)
	})
	if err == nil && found {
		err = ix.db.Sync()
	}
	if err != nil {
		return false, fmt.Errorf("index: read the clean-shutdown mark: %w", err)
	}
	return found, nil
}
