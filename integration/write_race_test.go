package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// TestReadWhileUploadCompletes: a file written with --upload async is
// opened, stat'ed and read in a tight loop by several readers while its
// upload runs and completes, round after round (each round rewrites it
// with new content of a new size). Not one of at least 1,000 iterations
// may get ENOENT, EIO, a wrong size or bytes other than the last close's:
// the file must not flicker between its local copy and the bucket's.
func TestReadWhileUploadCompletes(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	be := w.(backend.Backend)
	// TTL 0: every stat and open looks the name up again, so lookups race
	// the end of the upload too, not only reads of an open inode.
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async", "--metadata-ttl", "0")
	p := filepath.Join(m.dir, "ckpt.bin")
	const rounds, readers, minIters = 12, 4, 1000
	var iters atomic.Int64
	for round := range rounds {
		want := randData(uint64(500+round), 256<<10+round*4096)
		if _, err := writeFile(p, want); err != nil {
			t.Fatalf("round %d: write: %v", round, err)
		}
		// Readers run until the bucket holds this round's object, then
		// some more iterations past it.
		uploaded := make(chan struct{})
		go func() {
			defer close(uploaded)
			deadline := time.Now().Add(2 * time.Minute)
			for time.Now().Before(deadline) {
				if info, err := be.Stat(context.Background(), "ckpt.bin"); err == nil && info.Size == int64(len(want)) {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, readers)
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				after := -1 // iterations left once the upload landed
				buf := make([]byte, len(want)+4096)
				for i := 0; after != 0; i++ {
					if after < 0 {
						select {
						case <-uploaded:
							after = minIters / rounds / readers * 2
						default:
						}
					} else {
						after--
					}
					iters.Add(1)
					if err := readOnce(p, want, buf); err != nil {
						errs <- fmt.Errorf("round %d reader %d iteration %d: %w", round, r, i, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got, _, err := bucketSHA(t, w, "ckpt.bin"); err != nil || got != sha(want) {
			t.Fatalf("round %d: the bucket does not hold the last close: %v", round, err)
		}
	}
	if n := iters.Load(); n < minIters {
		t.Fatalf("only %d iterations ran (want at least %d)", n, minIters)
	}
	t.Logf("%d open/stat/read iterations across %d uploads", iters.Load(), rounds)
}

// readOnce stats, opens and reads p whole, and checks it is want.
func readOnce(p string, want, buf []byte) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Size() != int64(len(want)) {
		return fmt.Errorf("stat: size %d, want %d", st.Size(), len(want))
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	n := 0
	for n < len(buf) {
		k, err := f.Read(buf[n:])
		n += k
		if k == 0 || err != nil {
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read at %d: %w", n, err)
			}
			break
		}
	}
	if n != len(want) || !bytes.Equal(buf[:n], want) {
		fst, _ := f.Stat()
		return fmt.Errorf("read %d bytes, want %d; content equal: %v (stat: ino %d size %d; fstat: ino %d size %d)", n, len(want),
			bytes.Equal(buf[:min(n, len(want))], want[:min(n, len(want))]),
			st.Sys().(*syscall.Stat_t).Ino, st.Size(), fst.Sys().(*syscall.Stat_t).Ino, fst.Size())
	}
	return nil
}
