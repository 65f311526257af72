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
type dirWarmer struct {
	f         *FS
	trigger   int           // distinct uncached small files opened in a dir...
	window    time.Duration // ...within this time start warming it
	maxActive int           // directories warmed at once

	mu     sync.Mutex
	seen   map[string]*dirSeen
	active int
	done   map[string]time.Time // dirs warmed recently (not again for a while)
}

type dirSeen struct {
	first time.Time
	files map[string]bool
}

func newDirWarmer(f *FS) *dirWarmer {
	return &dirWarmer{f: f, trigger: 3, window: 30 * time.Second, maxActive: 2,
		seen: map[string]*dirSeen{}, done: map[string]time.Time{}}
}

// opened records that a reader opened an uncached small file.
func (w *dirWarmer) opened(dir, name string) {
	now := time.Now()
	w.mu.Lock()
	if t, ok := w.done[dir]; ok && now.Sub(t) < 10*time.Minute {
		w.mu.Unlock()
		return
	}
	s := w.seen[dir]
	if s == nil || now.Sub(s.first) > w.window {
		if len(w.seen) > 10_000 {
			clear(w.seen)
		}
		s = &dirSeen{first: now, files: map[string]bool{}}
		w.seen[dir] = s
	}
	s.files[name] = true
	start := len(s.files) >= w.trigger && w.active < w.maxActive
	if start {
		delete(w.seen, dir)
		w.done[dir] = now
		w.active++
	}
	w.mu.Unlock()
	if start {
		go w.warm(dir)
	}
}

// warm fetches every small, uncached file of dir at background priority,
// pacing itself on the memory budget and stopping when the cache is
// nearly full (warming must not evict what readers use).
func (w *dirWarmer) warm(dir string) {
	defer func() {
		w.mu.Lock()
		w.active--
		w.mu.Unlock()
	}()
	f := w.f
	ctx := context.Background()
	r := f.meta.OpenDir(ctx, dir)
	small := f.fetch.Options().SmallObject
	warmed := 0
	for {
		e, ok, err := r.Next(ctx)
		if err != nil || !ok {
			break
		}
		if e.Dir || e.Local || e.Size == 0 || e.Size > small {
			continue
		}
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
