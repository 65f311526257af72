package meta

import (
	"context"
	"fmt"

	"github.com/stratafs/strata/backend"
)

// Refresh asks the backend about name in dir now, whatever the TTL (the
// way out of --metadata-ttl indefinite when an object did change), and
// records the answer in the directory's listing, the point lookups and
// the index. Whatever was cached under name as a directory is dropped, to
// be listed again on its next use. A name gone from the bucket is
// backend.ErrNotExist; an unreachable backend is an error and changes
// nothing. Local entries (written here, not yet uploaded) are left as
// they are: they win over the bucket until their upload lands.
func (c *Cache) Refresh(ctx context.Context, dir, name string) (Entry, error) {
	key := dir + name
	info, isDir, isFile, err := c.probe(ctx, key, false)
	if err != nil {
		return Entry{}, fmt.Errorf("meta: refresh %q: %w", key, err)
	}
	// mutate edits the listing in memory; load it from the index first if
	// it is only there, or the old entry would come back from disk.
	c.dir(dir).current(c)
	c.InvalidatePrefix(key + "/")
	if !isDir && !isFile {
		c.mutate(dir, name, nil)
		return Entry{}, backend.ErrNotExist
	}
	e := probedEntry(name, info, isDir)
	c.mutate(dir, name, &e)
	return e, nil
}

// RefreshAll forgets every listing and lookup under prefix (the whole
// mount when prefix is its root): each is fetched again on its next use.
func (c *Cache) RefreshAll(prefix string) {
	c.InvalidatePrefix(prefix)
}
