package writeback

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// newEnvOnBoot is newEnv on a machine whose boot is identified by boot.
func newEnvOnBoot(t *testing.T, mode Mode, b *fakeBucket, dir, boot string) *env {
	t.Helper()
	return openEnv(t, b, b, dir, func(o *Options) { o.Mode, o.BootID = mode, boot })
}

// tearStagedFiles zeroes the second half of every staged file: what a
// machine crash can leave of bytes that were never flushed to disk.
func tearStagedFiles(t *testing.T, stagingDir string) {
	t.Helper()
	ents, err := os.ReadDir(stagingDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range ents {
		p := filepath.Join(stagingDir, de.Name())
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(make([]byte, fi.Size()-fi.Size()/2), fi.Size()/2)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// startSyncUploadAndStop commits key in sync mode with the bucket holding
// the upload, then stops the manager while the upload is in flight (its
// close never returned): the journal keeps it, as after a crash. It
// returns the staging directory.
func startSyncUploadAndStop(t *testing.T, b *fakeBucket, dir, boot, key string, data []byte) string {
	t.Helper()
	b.gate = make(chan struct{})
	e := newEnvOnBoot(t, Sync, b, dir, boot)
	st := e.stage(t, data)
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Commit(context.Background(), key, st, backend.VersionAbsent, 1)
		done <- err
	}()
	for b.puts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	staging := e.store.StagingDir()
	e.close()
	if err := <-done; err == nil {
		t.Fatal("a sync commit whose upload was cut short returned success")
	}
	b.gate = nil
	return staging
}

// TestSyncUploadCutShortByAMachineCrashIsKeptNotUploaded: in sync mode
// the staged bytes are not fsync'd before the upload (close returns only
// once the object is in the bucket). A machine crash mid-upload may leave
// them torn, so the next boot must not upload them: they are kept aside
// and reported. A crash of the mount alone (same boot: the page cache
// holds every byte) still completes the upload.
func TestSyncUploadCutShortByAMachineCrashIsKeptNotUploaded(t *testing.T) {
	data := bytes.Repeat([]byte("sync checkpoint "), 4096)
	b := newBucket()
	dir := t.TempDir()
	tearStagedFiles(t, startSyncUploadAndStop(t, b, dir, "boot-1", "torn.pt", data))

	e2 := newEnvOnBoot(t, Sync, b, dir, "boot-2")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e2.m.WaitKey(ctx, "torn.pt"); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("torn.pt"); ok {
		t.Fatalf("a sync upload whose bytes were never flushed went up after a reboot: %d of %d bytes", len(got), len(data))
	}
	s := e2.m.Summary()
	if len(s.Failed) != 1 || s.Failed[0].Key != "torn.pt" || !strings.Contains(s.Failed[0].Error, "not uploaded") {
		t.Fatalf("the cut-short upload is not reported as kept: %+v", s)
	}
	if _, err := os.Stat(s.Failed[0].Staging); err != nil {
		t.Fatalf("the staged bytes were not kept: %v", err)
	}
}

// TestSyncUploadCutShortByAProcessCrashCompletes: same boot, the staged
// bytes are whole in the page cache: the next mount uploads them.
func TestSyncUploadCutShortByAProcessCrashCompletes(t *testing.T) {
	data := bytes.Repeat([]byte("sync checkpoint "), 4096)
	b := newBucket()
	dir := t.TempDir()
	startSyncUploadAndStop(t, b, dir, "boot-1", "whole.pt", data)
	e := newEnvOnBoot(t, Sync, b, dir, "boot-1")
	if err := e.m.WaitKey(context.Background(), "whole.pt"); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("whole.pt"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("after a restart on the same boot the upload did not complete (%d bytes, %v)", len(got), ok)
	}
}

// TestFailedSyncUploadIsDurable: a sync upload whose first attempt fails
// returns the error to close() with the bytes kept for a retry: from then
// on they are flushed to disk, so even a reboot uploads them.
func TestFailedSyncUploadIsDurable(t *testing.T) {
	data := bytes.Repeat([]byte("retried checkpoint "), 4096)
	b := newBucket()
	b.setFail(backend.ErrUnavailable)
	dir := t.TempDir()
	e := newEnvOnBoot(t, Sync, b, dir, "boot-1")
	if _, err := e.m.Commit(context.Background(), "retry.pt", e.stage(t, data), backend.VersionAbsent, 1); err == nil {
		t.Fatal("the first attempt against a failing bucket succeeded")
	}
	e.close()
	b.setFail(nil)
	e2 := newEnvOnBoot(t, Sync, b, dir, "boot-2")
	if err := e2.m.WaitKey(context.Background(), "retry.pt"); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("retry.pt"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("a failed sync upload (close returned its error, bytes kept) did not go up after a reboot (%d bytes, %v)", len(got), ok)
	}
}

// TestDeleteBetweenRegisterAndJournal: the filesystem registers a commit
// under its node locks and journals it after letting go of them; an unlink
// in between drops the job. Journal then has no content to flush and must
// say the file is gone, not crash the mount.
func TestDeleteBetweenRegisterAndJournal(t *testing.T) {
	for _, mode := range []Mode{Sync, Async} {
		t.Run(string(mode), func(t *testing.T) {
			b := newBucket()
			e := newEnvOnBoot(t, mode, b, t.TempDir(), "")
			j, err := e.m.Register("unlinked", e.stage(t, []byte("deleted while committing")), backend.VersionAbsent, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			e.m.Cancel("unlinked")
			if err := e.m.Journal(context.Background(), j); err != nil {
				t.Fatalf("journaling a commit deleted meanwhile: %v", err)
			}
			if _, err := e.m.WaitAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, ok := b.get("unlinked"); ok {
				t.Fatal("a file deleted before its commit was journaled went up")
			}
		})
	}
}

// TestSyncCommitReturnsOnceTheObjectIsUp: a sync close returns when the
// object is whole in the bucket; making the staged file the cached copy
// and updating the namespace follow without holding the writer.
func TestSyncCommitReturnsOnceTheObjectIsUp(t *testing.T) {
	b := newBucket()
	e := newEnvOnBoot(t, Sync, b, t.TempDir(), "")
	e.upserted = make(chan struct{}) // the namespace update waits
	st := e.stage(t, []byte("up"))
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Commit(context.Background(), "k", st, backend.VersionAbsent, 1)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(e.upserted)
		t.Fatal("a sync commit waited for the local bookkeeping after its object was in the bucket")
	}
	if got, ok := b.get("k"); !ok || string(got) != "up" {
		t.Fatalf("sync commit returned before the object was in the bucket: %q %v", got, ok)
	}
	close(e.upserted)
}
