package fs

import (
	"context"
	"sync"
	"time"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
)

// dirWarmer notices readers walking a directory's small files (in any
// order, as a shuffled DataLoader epoch does) and fetches the directory's
// other small files in the background. With one GET per file and a fixed
// number of readers, the first epoch is capped by latency; this puts more
// requests in flight than the readers create. Background fetches yield to
// demand reads and readahead, and only take buffers the memory budget has.
//
// "Walking" means a share of the directory (percent of its small files,
// at least trigger of them) opened within a window: a few random files of
// a big directory are a sample, not a walk (a DataLoader's first batch
// over a dataset of 1,000-file directories opens two or three per
// directory), and warming the rest for them only competes with the
// readers for the bucket. Sizing a directory takes its listing: when the
// mount has none (the files were opened by path, with no readdir), twice
// trigger files are asked for before the warmer lists it.
type dirWarmer struct {
	f         *FS
	trigger   int           // distinct uncached small files opened in a dir...
	percent   int           // ...and at least this share of its small files...
	window    time.Duration // ...within this time (per trigger files) start warming it
	maxActive int           // directories warmed (or sized) at once

	mu     sync.Mutex
	seen   map[string]*dirSeen
	active int
	done   map[string]time.Time // dirs warmed recently (not again for a while)
}

type dirSeen struct {
	first    time.Time
	files    map[string]bool
	need     int  // files to open before the next try (0: trigger)
	checking bool // a warm of the directory is sizing it
}

// maxWarmFiles bounds the small files of one directory warmed (and held
// while sizing it).
const maxWarmFiles = 100_000

func newDirWarmer(f *FS) *dirWarmer {
	return &dirWarmer{f: f, trigger: 3, percent: 3, window: 30 * time.Second, maxActive: 2,
		seen: map[string]*dirSeen{}, done: map[string]time.Time{}}
}

// opened records that a reader opened an uncached small file.
func (w *dirWarmer) opened(dir, name string) {
	now := time.Now()
	w.mu.Lock()
	if w.warmedLocked(dir, now) {
		w.mu.Unlock()
		return
	}
	sized := w.seen[dir] != nil && w.seen[dir].need > 0
	w.mu.Unlock()
	// Without a listing, sizing the directory costs a request: ask for
	// more evidence first. Asked only while the need is not known, and
	// with no lock held: this may read the index.
	first := w.trigger
	if !sized && !w.f.meta.Listed(dir) {
		first = 2 * w.trigger
	}
	w.mu.Lock()
	if w.warmedLocked(dir, now) {
		w.mu.Unlock()
		return
	}
	s := w.seen[dir]
	need := first
	if s != nil && s.need > 0 {
		need = s.need
	}
	// The window grows with what must be seen: a big directory is walked
	// at the same pace per file as a small one.
	if s == nil || (!s.checking && now.Sub(s.first) > w.window*time.Duration(max(1, need/w.trigger))) {
		if len(w.seen) > 10_000 {
			clear(w.seen)
		}
		n := &dirSeen{first: now, files: map[string]bool{}}
		if s != nil {
			n.need = s.need
		}
		s = n
		w.seen[dir] = s
	}
	s.files[name] = true
	start := !s.checking && len(s.files) >= need && w.active < w.maxActive
	if start {
		s.checking = true
		w.active++
	}
	w.mu.Unlock()
	if start {
		go w.warm(dir, s)
	}
}

// warmedLocked reports whether dir was warmed in the last ten minutes.
func (w *dirWarmer) warmedLocked(dir string, now time.Time) bool {
	t, ok := w.done[dir]
	return ok && now.Sub(t) < 10*time.Minute
}

// warm lists dir and, if the files opened are a share of its small files,
// fetches every small, uncached one at background priority, pacing itself
// on the memory budget and stopping when the cache is nearly full
// (warming must not evict what readers use). Otherwise it records how
// many files must be opened first.
func (w *dirWarmer) warm(dir string, s *dirSeen) {
	defer func() {
		w.mu.Lock()
		w.active--
		w.mu.Unlock()
	}()
	f := w.f
	ctx := context.Background()
	r := f.meta.OpenDir(ctx, dir)
	small := f.fetch.Options().SmallObject
	var files []meta.Entry
	for len(files) <= maxWarmFiles {
		e, ok, err := r.Next(ctx)
		if err != nil || !ok {
			break
		}
		if e.Dir || e.Local || e.Size == 0 || e.Size > small {
			continue
		}
		files = append(files, e)
	}
	w.mu.Lock()
	if opened := len(s.files); opened*100 < len(files)*w.percent || len(files) > maxWarmFiles {
		s.need = max(w.trigger, (len(files)*w.percent+99)/100)
		s.checking = false
		w.mu.Unlock()
		f.log.Debug("fs: directory not warmed: too few of its files opened yet", "dir", dir, "opened", opened, "files", len(files), "need", s.need)
		return
	}
	if w.seen[dir] == s {
		delete(w.seen, dir)
	}
	w.done[dir] = time.Now()
	w.mu.Unlock()

	warmed := 0
	for _, e := range files {
		if f.store.Used() > f.store.Limit()/10*9 {
			f.log.Debug("fs: cache nearly full; directory warming stops", "dir", dir)
			return
		}
		obj, err := f.store.Acquire(cache.ObjectKey{Source: f.source, Key: meta.Join(dir, e.Name, false), Version: e.Version, Size: e.Size, MTime: e.MTime})
		if err != nil {
			continue
		}
		for !obj.Complete() && f.fetch.Prefetch(obj) == 0 {
			time.Sleep(5 * time.Millisecond) // budget full, or all in flight: wait a little
			if f.fetch.Budget().Free() > 0 {
				break
			}
		}
		obj.Release()
		warmed++
	}
	f.log.Debug("fs: warmed directory", "dir", dir, "files", warmed)
}
