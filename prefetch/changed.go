package prefetch

import "github.com/stratafs/strata/cache"

// An object replaced in the bucket under its readers fails every fetch of
// the version they read (backend.ErrVersionChanged, ESTALE for the
// application). That is one event for an operator, not one per block a
// sequential reader and its readahead asked for: the fetcher warns at the
// first failure of each version and logs the rest at debug level.

// maxChangedVersions bounds the versions remembered as logged; past it the
// set starts again (a version may then be warned about twice).
const maxChangedVersions = 4096

// firstChangeOf reports whether k's change has not been warned about yet,
// and records that it now is.
func (f *Fetcher) firstChangeOf(k cache.ObjectKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, seen := f.changed[k]; seen {
		return false
	}
	if f.changed == nil || len(f.changed) >= maxChangedVersions {
		f.changed = map[cache.ObjectKey]struct{}{}
	}
	f.changed[k] = struct{}{}
	return true
}
