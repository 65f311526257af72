package writeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/index"
)

// TestEveryCrashPointLeavesTheJournalsBytesFindable: at every point where
// a kill -9 can fall between deleting a journal entry and moving or
// removing its staged file, what the next mount would find must add up:
// each entry's bytes are still staged, or set aside in failed-writes.
// An entry with neither is reported at the next mount as an upload that
// "lost its staging file" (an upload that had completed, a job that was
// dropped on purpose), and a staged file with no entry is removed there
// (a write about to be kept would be lost, which is checked for the live
// file kept aside). Covered: a completed upload, a superseded job, a
// discard, a live file kept aside.
func TestEveryCrashPointLeavesTheJournalsBytesFindable(t *testing.T) {
	var mu sync.Mutex
	var bad []string
	points := 0
	keeping := "" // the staged file of a write being kept: it must survive a restart
	crashTestHook = func(m *Manager) {
		_, file, line, _ := runtime.Caller(2)
		where := fmt.Sprintf("%s:%d", filepath.Base(file), line)
		mu.Lock()
		points++
		mustSurvive := keeping
		mu.Unlock()
		journaled := false
		_ = m.ix.ScanUploads(func(_ uint64, r index.UploadRecord, err error) error {
			if err != nil || r.Source != m.source {
				return nil
			}
			journaled = journaled || r.Staging == mustSurvive
			if _, serr := os.Stat(filepath.Join(m.store.StagingDir(), r.Staging)); serr == nil || m.keptAlready(r.Staging) {
				return nil
			}
			mu.Lock()
			bad = append(bad, fmt.Sprintf("killed at %s: journal entry for %s has no staged or kept file", where, r.Key))
			mu.Unlock()
			return nil
		})
		// A staged file no entry owns is removed by the next mount: the
		// bytes of a write being kept must be journaled or kept by then.
		if mustSurvive != "" && !journaled && !m.keptAlready(mustSurvive) {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("killed at %s: the write being kept is neither journaled nor in failed-writes", where))
			mu.Unlock()
		}
	}
	t.Cleanup(func() { crashTestHook = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A completed upload (sync: returns once complete).
	sync := newEnv(t, Sync, newBucket(), "")
	if _, err := sync.m.Commit(ctx, "done", sync.stage(t, []byte("uploaded")), backend.VersionAbsent, 1); err != nil {
		t.Fatal(err)
	}
	sync.close()

	// Held back by the upload delay: a superseded job, a discard, a live
	// file kept aside.
	e := openEnv(t, newBucket(), nil, "", func(o *Options) { o.Mode, o.Delay = Async, time.Hour })
	commitAsync(t, e, "k", []byte("first"), backend.VersionAbsent)
	commitAsync(t, e, "k", []byte("second"), "")
	if _, err := e.m.Discard(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	st := e.stage(t, []byte("written by the kernel"))
	j, _, _, err := e.m.RegisterLive("live", st, backend.VersionAbsent)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Journal(ctx, j); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	keeping = st.Name()
	mu.Unlock()
	e.m.KeepLive(j, errors.New("writer killed"))
	e.close()

	mu.Lock()
	defer mu.Unlock()
	if points < 6 {
		t.Fatalf("only %d crash points reached; the scenarios did not run their ends", points)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestACrashAfterAnUploadLandsLeavesItFindable: at every point where a
// kill -9 can fall once an upload has landed, the next mount must find
// it journaled (and recognise that it landed) or the namespace must have
// heard of it. The journal entry went first: killed before the namespace
// update, the next mount found nothing to resume and listed the version
// before the upload (kept in the index), while the bucket held the new
// one, until the metadata TTL (for good with indefinite) (found by
// TestRandomCallsMatchLocalDisk with restarts: a file read at its size
// before the last close's upload).
func TestACrashAfterAnUploadLandsLeavesItFindable(t *testing.T) {
	var mu sync.Mutex
	var cur *env
	var bad []string
	crashTestHook = func(m *Manager) {
		mu.Lock()
		e := cur
		mu.Unlock()
		if e == nil {
			return
		}
		journaled := false
		_ = m.ix.ScanUploads(func(_ uint64, r index.UploadRecord, err error) error {
			journaled = journaled || (err == nil && r.Key == "k")
			return nil
		})
		if _, heard := e.uploaded.Load("k"); !journaled && !heard {
			_, file, line, _ := runtime.Caller(2)
			mu.Lock()
			bad = append(bad, fmt.Sprintf("killed at %s:%d: the landed upload is neither journaled nor in the namespace", filepath.Base(file), line))
			mu.Unlock()
		}
	}
	t.Cleanup(func() { crashTestHook = nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, mode := range []Mode{Sync, Async} {
		e := newEnv(t, mode, newBucket(), "")
		mu.Lock()
		cur = e
		mu.Unlock()
		j, err := e.m.Commit(ctx, "k", e.stage(t, []byte("landed")), backend.VersionAbsent, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		cur = nil
		mu.Unlock()
		e.close()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		t.Error(b)
	}
}
