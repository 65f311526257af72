package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/stratafs/strata/backend"
)

// stopAt is a ReaderAt that closes stop once a read reaches at: an upload
// stopped while it is being sent.
type stopAt struct {
	r    io.ReaderAt
	at   int64
	once sync.Once
	stop chan struct{}
}

func (s *stopAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > s.at {
		s.once.Do(func() { close(s.stop) })
	}
	return s.r.ReadAt(p, off)
}

// testStop checks PutOptions.Stop: a Put stopped before it is sent is
// ErrStopped and leaves nothing; a Put stopped while it is being sent
// says truthfully whether its object appeared (nil and the object whole,
// or ErrStopped and nothing), which is what lets the write path take
// back an upload that landed after the file was renamed or deleted.
func testStop(t *testing.T, h Harness) {
	multi := int64(2*h.PartSize + 1234)
	t.Run("BeforeSend", func(t *testing.T) {
		b := h.leaf(t)
		for _, size := range []int64{1, multi} {
			stop := make(chan struct{})
			close(stop)
			key := fmt.Sprintf("p/stopped-%d", size)
			_, err := writer(t, b).Put(ctx(t), key, bytes.NewReader(payload(int(size), 1)), size,
				backend.PutOptions{PartSize: h.PartSize, Concurrency: 2, Stop: stop})
			failUnsupported(t, err)
			if !errors.Is(err, backend.ErrStopped) {
				t.Fatalf("Put(%d bytes) stopped before it began: %v, want ErrStopped", size, err)
			}
			if _, err := b.Stat(ctx(t), key); !errors.Is(err, backend.ErrNotExist) {
				t.Fatalf("a stopped Put(%d bytes) left an object: Stat = %v", size, err)
			}
		}
	})
	t.Run("WhileSent", func(t *testing.T) {
		b := h.leaf(t)
		for _, size := range []int64{4097, multi} {
			for _, at := range []int64{0, h.PartSize + 1, size - 1} {
				if at >= size {
					continue
				}
				key := fmt.Sprintf("p/stop-%d-at-%d", size, at)
				data := payload(int(size), 2)
				r := &stopAt{r: bytes.NewReader(data), at: at, stop: make(chan struct{})}
				_, err := writer(t, b).Put(ctx(t), key, r, size,
					backend.PutOptions{PartSize: h.PartSize, Concurrency: 2, Stop: r.stop})
				failUnsupported(t, err)
				_, serr := b.Stat(ctx(t), key)
				switch {
				case err == nil && serr == nil:
					mustRead(t, b, key, "", 0, data)
				case errors.Is(err, backend.ErrStopped) && errors.Is(serr, backend.ErrNotExist):
				default:
					t.Fatalf("Put(%d bytes) stopped at byte %d: %v, and then Stat = %v: the answer must say whether the object appeared", size, at, err, serr)
				}
			}
		}
	})
}
