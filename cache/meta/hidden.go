package meta

import "strings"

// An upload of a file that a delete or a rename overtook while it ran can
// still put its object in the bucket: the uploader then takes it back
// down (cache/writeback), but until then the bucket lists a name that no
// file has any more, which local disk would never show, and `rm -rf` of
// its directory would find it not empty. The uploader hides such a key
// here for that while: listings and lookups do not show the name from the
// bucket, and the filesystem's emptiness check leaves it out.

// Hide says that the bucket may show key for a while though no file has
// that name: until Unhide, listings and lookups leave out the bucket's
// object of that name. A file written here under the name still shows
// (its local entry wins), and an Upsert of the key, an object that is
// the name's, ends the hiding. Calls nest.
func (c *Cache) Hide(key string) {
	c.mu.Lock()
	if c.hidden == nil {
		c.hidden = map[string]int{}
	}
	c.hidden[key]++
	c.mu.Unlock()
}

// Unhide ends one Hide of key. Ending the last, it records the name as
// gone from the bucket (Remove: the uploader has taken the object down),
// unless an Upsert ended the hiding first: a listing fetched while the
// object was there, and installed after, does not bring the name back
// (the load applies the removal, made while it ran, as it ends). It may
// write the index.
func (c *Cache) Unhide(key string) {
	c.mu.Lock()
	n := c.hidden[key]
	if n <= 1 {
		delete(c.hidden, key)
	} else {
		c.hidden[key]--
	}
	c.mu.Unlock()
	if n == 1 {
		dir, name := Parent(key)
		c.Remove(dir, name)
	}
}

// Hidden reports whether key is hidden (Hide): an object under it is one
// on its way out of the bucket.
func (c *Cache) Hidden(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hidden[key] > 0
}

// HiddenUnder reports whether some hidden key lies under prefix: a
// common prefix the bucket lists there may hold nothing else.
func (c *Cache) HiddenUnder(prefix string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.hidden {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// unhideUpserted ends the hiding of key: the bucket's object under it is
// the name's now (Upsert).
func (c *Cache) unhideUpserted(key string) {
	c.mu.Lock()
	delete(c.hidden, key)
	c.mu.Unlock()
}

// overrideOf returns what stands in for the bucket's entry of name in
// dir: a local entry (local), or nothing, the name being hidden (hidden).
func (c *Cache) overrideOf(dir, name string) (e Entry, local, hidden bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.local[dir][name]; ok {
		return e, true, false
	}
	if len(c.hidden) == 0 {
		return Entry{}, false, false // the usual case: no key built (it would allocate)
	}
	return Entry{}, false, c.hidden[dir+name] > 0
}
