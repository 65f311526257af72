package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// keyWatcher lists the bucket every few milliseconds for the whole test
// and remembers every key it ever saw.
type keyWatcher struct {
	be   backend.Backend
	mu   sync.Mutex
	seen map[string]bool
	stop chan struct{}
	done chan struct{}
}

func watchKeys(t *testing.T, be backend.Backend) *keyWatcher {
	k := &keyWatcher{be: be, seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for {
			page, err := be.List(context.Background(), "", backend.ListOptions{Recursive: true})
			if err == nil {
				k.mu.Lock()
				for _, o := range page.Objects {
					k.seen[o.Key] = true
				}
				k.mu.Unlock()
			}
			select {
			case <-k.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(k.halt)
	return k
}

func (k *keyWatcher) halt() {
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	<-k.done
}

// seenUnder lists the file keys (not directory markers) seen under prefix.
func (k *keyWatcher) seenUnder(prefix string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for key := range k.seen {
		if strings.HasPrefix(key, prefix) && !strings.HasSuffix(key, "/") {
			out = append(out, key)
		}
	}
	return out
}

// TestAsyncRenameOfAFreshDirectoryCopiesNothing: the Hugging Face
// Trainer's pattern with --upload async and the default upload delay.
// Files are written one after the other into tmp-checkpoint-1/ (the
// second one slowly, for longer than the delay) and the directory is
// renamed right after the last close: no upload starts while a file of
// the directory is being written, so the rename moves staged files and
// the bucket never holds a tmp-checkpoint-1/ object; the files then land
// under checkpoint-1/ on their own, whole.
func TestAsyncRenameOfAFreshDirectoryCopiesNothing(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	be := w.(backend.Backend)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async")
	keys := watchKeys(t, be)

	tmp := filepath.Join(m.dir, "tmp-checkpoint-1")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	model, optim := randData(90, 4<<20), randData(91, 7<<20)
	if err := os.WriteFile(filepath.Join(tmp, "model.safetensors"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	// The optimizer state is written over 7 s, longer than the 5 s delay
	// that follows the model's close.
	f, err := os.Create(filepath.Join(tmp, "optimizer.pt"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(optim); off += 1 << 20 {
		time.Sleep(time.Second)
		if _, err := f.Write(optim[off : off+1<<20]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "checkpoint-1")); err != nil {
		t.Fatal(err)
	}
	// No strata sync: the uploads start on their own once the directory
	// is quiet.
	want := map[string][]byte{"checkpoint-1/model.safetensors": model, "checkpoint-1/optimizer.pt": optim}
	for key, data := range want {
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, _, err := bucketSHA(t, w, key)
			if err == nil && got == sha(data) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not whole in the bucket 60 s after the rename: %v", key, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	keys.halt()
	if got := keys.seenUnder("tmp-checkpoint-1/"); len(got) > 0 {
		t.Errorf("the bucket held %q before the rename: uploaded, then copied server-side", got)
	}
}

// TestAsyncUploadDelayEndsAtFsyncAndSync: with a delay far longer than
// the test, fsync and strata sync still upload at once (each waits for
// its upload), and a file closed and left alone is not uploaded.
func TestAsyncUploadDelayEndsAtFsyncAndSync(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async", "--upload-delay", "1h")

	a, b := randData(92, 1<<20), randData(93, 2<<20)
	if err := os.WriteFile(filepath.Join(m.dir, "left.bin"), a, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(m.dir, "synced.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := bucketSHA(t, w, "synced.bin"); err != nil || got != sha(b) {
		t.Fatalf("synced.bin after fsync: %v", err)
	}
	if _, _, err := bucketSHA(t, w, "left.bin"); err == nil {
		t.Fatal("left.bin went up before its delay ended")
	}
	out := runSync(t, m)
	if got, _, err := bucketSHA(t, w, "left.bin"); err != nil || got != sha(a) {
		t.Fatalf("left.bin after strata sync: %v\n%s", err, out)
	}
}
