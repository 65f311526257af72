package prefetch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stratafs/strata/backend"
)

// syncBuffer is a log sink safe for the fetcher's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestChangedObjectWarnsOncePerVersion: an object replaced in the bucket
// under a reader fails every fetch of its old version (ESTALE for the
// application, as documented). That is one event, not one per block: a
// sequential reader of a large file used to log a WARN for each block it
// and its readahead asked for. The first failure of a version warns, the
// rest are at debug level; another version warns again.
func TestChangedObjectWarnsOncePerVersion(t *testing.T) {
	logs := &syncBuffer{}
	e := newEnv(t, 64, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	for _, key := range []string{"a.bin", "b.bin"} {
		_, o := e.object(t, key, 40*bs)
		e.be.put(key, []byte("replaced"), "v2")
		r := e.f.NewReader(o)
		buf := make([]byte, bs)
		for off := int64(0); off < 40*bs; off += bs {
			if _, err := r.ReadAt(context.Background(), buf, off); !errors.Is(err, backend.ErrVersionChanged) {
				t.Fatalf("%s: read at %d: %v, want ErrVersionChanged", key, off, err)
			}
		}
	}
	e.f.Close()
	warns := strings.Count(logs.String(), "level=WARN")
	if warns != 2 {
		t.Fatalf("%d WARN lines for two objects changed under 40 reads each, want 2 (one per version):\n%s", warns, logs.String())
	}
	if !strings.Contains(logs.String(), "changed in the bucket") {
		t.Fatalf("the warning does not say the object changed:\n%s", logs.String())
	}
}
