package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/index"
	"github.com/stratafs/strata/cache/uring"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
)

func newEngine(name string) (uring.Engine, error) {
	kind, err := uring.ParseKind(name)
	if err != nil {
		return nil, err
	}
	return uring.New(kind, uring.DefaultOptions())
}

func frozenClock() time.Time { return time.Unix(0, 0) }

// VerifyProgress is verify's state, streamed and final.
type VerifyProgress struct {
	Objects     int64    `json:"objects"`
	DoneObjects int64    `json:"done_objects"`
	Bytes       int64    `json:"bytes"`
	DoneBytes   int64    `json:"done_bytes"`
	BadBlocks   int64    `json:"bad_blocks"`
	BadObjects  int64    `json:"bad_objects"`
	Damaged     []string `json:"damaged,omitempty"` // keys with dropped blocks (the first 100)
	Live        bool     `json:"live"`              // done by the running mount
}

// verifyStore checks the CRC32C of every cached block, those verified
// before too, and drops the bad ones (they are fetched again when next
// read).
func verifyStore(ctx context.Context, store *cache.Store, workers int, report func(VerifyProgress)) (VerifyProgress, error) {
	type item struct {
		rec   index.ObjectRecord
		bytes int64
	}
	ix := store.Index()
	usage := map[index.ID]int64{}
	if err := ix.ScanBlockUsage(func(id index.ID, _, b int64) error { usage[id] = b; return nil }); err != nil {
		return VerifyProgress{}, err
	}
	var items []item
	var p VerifyProgress
	if err := ix.ScanObjects(func(id index.ID, rec index.ObjectRecord, err error) error {
		if err == nil && usage[id] > 0 {
			items = append(items, item{rec, usage[id]})
			p.Bytes += usage[id]
		}
		return nil
	}); err != nil {
		return p, err
	}
	p.Objects = int64(len(items))
	var doneObjs, doneBytes, badBlocks, badObjs atomic.Int64
	var mu sync.Mutex // guards damaged, firstErr
	var damaged []string
	var firstErr error
	ch := make(chan item)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				r := it.rec
				o, err := store.Acquire(cache.ObjectKey{Source: r.Source, Key: r.Key, Version: r.Version, Size: r.Size, MTime: r.MTime})
				bad := 0
				if err == nil {
					bad, err = o.Reverify()
					o.Release()
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("verify %s: %w", r.Key, err)
				}
				if bad > 0 && len(damaged) < 100 {
					damaged = append(damaged, r.Source+" "+r.Key)
				}
				mu.Unlock()
				if bad > 0 {
					badBlocks.Add(int64(bad))
					badObjs.Add(1)
				}
				doneObjs.Add(1)
				doneBytes.Add(it.bytes)
			}
		}()
	}
	snap := func() VerifyProgress {
		q := p
		q.DoneObjects, q.DoneBytes, q.BadBlocks, q.BadObjects = doneObjs.Load(), doneBytes.Load(), badBlocks.Load(), badObjs.Load()
		return q
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
feed:
	for _, it := range items {
		for {
			select {
			case ch <- it:
				continue feed
			case <-ctx.Done():
				break feed
			case <-tick.C:
				if report != nil {
					report(snap())
				}
			}
		}
	}
	close(ch)
	wg.Wait()
	q := snap()
	q.Damaged = damaged
	if report != nil {
		report(q)
	}
	if ctx.Err() != nil {
		return q, fmt.Errorf("verify interrupted: %w", ctx.Err())
	}
	return q, firstErr
}

// GCResult is what gc freed.
type GCResult struct {
	FreedBytes int64 `json:"freed_bytes"`
	UsedBytes  int64 `json:"used_bytes"`
	LimitBytes int64 `json:"limit_bytes"`
	Live       bool  `json:"live"`
}

// gcStore applies the store's size limit now: above 95% of it, the least
// recently used objects go until the cache is under 90%.
func gcStore(store *cache.Store) GCResult {
	freed := store.EvictNow()
	return GCResult{FreedBytes: freed, UsedBytes: store.Used(), LimitBytes: store.Limit(), Live: true}
}

// settleEviction waits for the eviction a freshly opened store starts on
// its own (Open kicks it) to finish, instead of racing it with EvictNow.
func settleEviction(store *cache.Store) GCResult {
	st := store.Stats()
	// The counters start at zero when the store opens; everything evicted
	// since (some of it possibly before this call) is this run's.
	const base = 0
	last, lastChange := st.EvictedBytes.Load(), time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		ev := st.EvictedBytes.Load()
		if ev != last {
			last, lastChange = ev, time.Now()
			continue
		}
		quiet := time.Since(lastChange)
		if quiet >= 300*time.Millisecond && (store.Used() <= store.Limit()/100*95 || quiet > 2*time.Second) {
			break
		}
	}
	return GCResult{FreedBytes: last - base, UsedBytes: store.Used(), LimitBytes: store.Limit()}
}

func cacheVerifyCmd() *cobra.Command {
	var dir string
	var asJSON bool
	var workers int
	cmd := &cobra.Command{
		Use:   "verify --cache-dir DIR",
		Short: "Re-check the CRC32C of every cached block and drop the bad ones",
		Long: `Re-check the CRC32C of every cached block against the index and drop the
blocks that fail (they are fetched again on their next read). It exits 0 and
says how many blocks it dropped; a non-zero exit means it could not finish.

While a mount serves the directory the mount does the check: it covers every
block the mount has not already checked since it started (blocks it wrote or
read were checked then); for a check of every block, unmount first.`,
		Example: `  strata cache verify --cache-dir /nvme/strata`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			pp := newProgressPrinter(os.Stderr, "verify", 10*time.Second)
			show := func(p VerifyProgress) {
				pp.update(progressState{Objects: p.Objects, DoneObjects: p.DoneObjects, Bytes: p.Bytes, DoneBytes: p.DoneBytes, Failed: p.BadObjects})
			}
			var res VerifyProgress
			err := viaMountOr(ctx, dir, control.Request{Op: "verify"}, &res, func(raw json.RawMessage) {
				var p VerifyProgress
				if json.Unmarshal(raw, &p) == nil {
					show(p)
				}
			}, func() error {
				store, closeFn, err := offlineStore(dir, "cache verify", 1<<62, true)
				if err != nil {
					return err
				}
				defer closeFn()
				res, err = verifyStore(ctx, store, workers, show)
				return err
			})
			pp.done()
			if asJSON {
				err = errors.Join(err, printJSON(res))
			} else if res.Objects > 0 || err == nil {
				fmt.Printf("verified %d objects (%s): %d bad blocks dropped in %d objects\n", res.DoneObjects, sizeStr(res.DoneBytes), res.BadBlocks, res.BadObjects)
				for _, k := range res.Damaged {
					fmt.Printf("  dropped blocks of %s\n", k)
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "cache-dir", "", "cache directory")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&workers, "workers", 4, "objects checked at once (offline)")
	requireFlag(cmd, "cache-dir")
	return cmd
}

func cacheGCCmd() *cobra.Command {
	var dir string
	var size config.Size
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gc --cache-dir DIR [--cache-size SIZE]",
		Short: "Apply the size limit now: evict least recently used objects",
		Long: `Evict least recently used objects until the cache is under 90% of its limit
(if it is above 95%), as a mount does in the background. Offline the limit is
--cache-size (default: keep 10% of the disk free); through a running mount it
is the mount's own limit.`,
		Example: `  strata cache gc --cache-dir /nvme/strata --cache-size 200GiB`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res GCResult
			err := viaMountOr(context.Background(), dir, control.Request{Op: "gc"}, &res, nil, func() error {
				store, closeFn, err := offlineStore(dir, "cache gc", int64(size), false)
				if err != nil {
					return err
				}
				defer closeFn()
				res = settleEviction(store)
				return nil
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(res)
			}
			where := ""
			if res.Live {
				where = " (by the running mount)"
			}
			fmt.Printf("freed %s%s: the cache holds %s of %s allowed\n", sizeStr(res.FreedBytes), where, sizeStr(res.UsedBytes), sizeStr(res.LimitBytes))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "cache-dir", "", "cache directory")
	cmd.Flags().Var(&size, "cache-size", "size limit to apply (offline; default: keep 10% of the disk free)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	requireFlag(cmd, "cache-dir")
	return cmd
}

// viaMountOr runs req through the mount serving dir if there is one, else
// offline().
func viaMountOr(ctx context.Context, dir string, req control.Request, result any, onProgress func(json.RawMessage), offline func() error) error {
	conn, _, err := control.Owner(dir)
	if err != nil {
		return err
	}
	if conn == nil {
		return offline()
	}
	defer conn.Close()
	go func() { <-ctx.Done(); conn.Close() }()
	return conn.Call(req, onProgress, result)
}

// printJSON prints v, indented, on stdout.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// errInUse: clear needs the directory to itself.
var errInUse = errors.New("cache directory in use")

// clearDir empties a cache dir nobody holds: it takes the same lock a
// mount takes, then removes only what strata put there (never the
// directory itself, never strata.log).
func clearDir(dir string, force bool) (objects, bytes int64, err error) {
	if _, err := os.Stat(filepath.Join(dir, "index")); err != nil {
		return 0, 0, fmt.Errorf("%s is not a strata cache directory (no index): %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return 0, 0, fmt.Errorf("%w: %s is used by %s; unmount it (or wait for it) first", errInUse, dir, cache.LockHolder(dir))
	}
	if staged, _ := os.ReadDir(filepath.Join(dir, "staging")); len(staged) > 0 && !force {
		return 0, 0, fmt.Errorf("%s holds %d staged files (written files not yet uploaded); they would be lost: mount it to let them upload, or use --force", dir, len(staged))
	}
	if ix, err := index.Open(filepath.Join(dir, "index"), index.DefaultOptions()); err == nil {
		// The counts are for the report: a damaged index, which is what
		// a clear is often for, must not stop it.
		_ = ix.ScanBlockUsage(func(_ index.ID, _, b int64) error { objects++; bytes += b; return nil })
		ix.Close()
	}
	for _, name := range []string{"index", "objects", "staging", "session.json", "session.json.tmp", "history.json", "history.json.tmp", control.SockName} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return objects, bytes, fmt.Errorf("clear %s: %w", dir, err)
		}
	}
	return objects, bytes, nil
}

func cacheClearCmd() *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "clear --cache-dir DIR",
		Short: "Empty a cache directory (not while it is mounted)",
		Long: `Remove every cached object, the index, the session and its history from the
cache directory. The directory itself and strata.log stay. It refuses while a
mount or another strata command uses the directory: a mounted cache cannot
be emptied under open files, so unmount first. It also refuses while written
files wait for upload, unless --force.`,
		Example: `  strata cache clear --cache-dir /nvme/strata`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, b, err := clearDir(dir, force)
			if err != nil {
				return err
			}
			fmt.Printf("cleared %s: %d objects (%s) removed\n", dir, n, sizeStr(b))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "cache-dir", "", "cache directory")
	cmd.Flags().BoolVar(&force, "force", false, "also discard written files not yet uploaded")
	requireFlag(cmd, "cache-dir")
	return cmd
}
