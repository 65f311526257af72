package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratafs/strata/backend"
)

// put uploads data and checks the returned ObjectInfo against Stat.
func put(t *testing.T, b backend.Backend, key string, data []byte, opt backend.PutOptions) (backend.ObjectInfo, error) {
	t.Helper()
	info, err := writer(t, b).Put(ctx(t), key, bytes.NewReader(data), int64(len(data)), opt)
	failUnsupported(t, err)
	if err != nil {
		return info, err
	}
	st, serr := b.Stat(ctx(t), key)
	if serr != nil {
		t.Fatalf("Stat(%q) after Put: %v", key, serr)
	}
	if info.Key != key || info.Size != int64(len(data)) || info.Version == "" || info.Version != st.Version || st.Size != info.Size {
		t.Fatalf("Put(%q, %d bytes) = %+v; Stat = %+v", key, len(data), info, st)
	}
	return info, nil
}

func testPut(t *testing.T, h Harness) {
	multi := int(2*h.PartSize + 1234)
	t.Run("Sizes", func(t *testing.T) {
		b := h.leaf(t)
		for _, size := range []int{0, 1, 4097, multi} {
			key := fmt.Sprintf("p/size-%d", size)
			data := payload(size, byte(size))
			if _, err := put(t, b, key, data, backend.PutOptions{PartSize: h.PartSize, Concurrency: 2}); err != nil {
				t.Fatalf("Put(%q, %d bytes): %v", key, size, err)
			}
			mustRead(t, b, key, "", 0, data)
		}
	})
	t.Run("Overwrite", func(t *testing.T) {
		b := h.leaf(t)
		v1, err := put(t, b, "p/obj", payload(100, 1), backend.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v2, err := put(t, b, "p/obj", payload(100, 2), backend.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v1.Version == v2.Version {
			t.Fatalf("overwrite kept version %q", v1.Version)
		}
		mustRead(t, b, "p/obj", v2.Version, 0, payload(100, 2))
	})
	t.Run("IfVersion", func(t *testing.T) {
		cases := []struct {
			name    string
			exists  bool
			ifVer   string // "current" and "stale" are replaced by real versions
			size    int
			wantErr error
		}{
			{"AbsentOnMissing", false, backend.VersionAbsent, 10, nil},
			{"AbsentOnExisting", true, backend.VersionAbsent, 10, backend.ErrPreconditionFailed},
			{"AbsentOnExistingMultipart", true, backend.VersionAbsent, multi, backend.ErrPreconditionFailed},
			{"CurrentVersion", true, "current", 10, nil},
			{"CurrentVersionMultipart", true, "current", multi, nil},
			{"StaleVersion", true, "stale", 10, backend.ErrPreconditionFailed},
			{"StaleVersionMultipart", true, "stale", multi, backend.ErrPreconditionFailed},
			{"VersionOnMissing", false, "stale", 10, backend.ErrPreconditionFailed},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				b := h.leaf(t)
				var before backend.ObjectInfo
				stale := "stale-version-that-never-existed"
				if c.exists {
					old := h.seed(t, b, "p/obj", payload(50, 1))
					stale = old.Version
					before = h.seed(t, b, "p/obj", payload(60, 2))
				}
				ifVer := c.ifVer
				switch ifVer {
				case "current":
					ifVer = before.Version
				case "stale":
					ifVer = stale
				}
				data := payload(c.size, 3)
				_, err := put(t, b, "p/obj", data, backend.PutOptions{IfVersion: ifVer, PartSize: h.PartSize})
				if c.wantErr == nil {
					if err != nil {
						t.Fatalf("conditional Put: %v", err)
					}
					mustRead(t, b, "p/obj", "", 0, data)
					return
				}
				wantErr(t, "conditional Put", err, c.wantErr)
				st, serr := b.Stat(ctx(t), "p/obj")
				switch {
				case !c.exists:
					wantErr(t, "Stat after a refused create", serr, backend.ErrNotExist)
				case serr != nil || st.Version != before.Version:
					t.Fatalf("refused Put changed the object: Stat = %+v, %v; was version %q", st, serr, before.Version)
				default:
					mustRead(t, b, "p/obj", before.Version, 0, payload(60, 2))
				}
			})
		}
	})
	t.Run("CreateRace", func(t *testing.T) {
		// Of many concurrent create-only puts, exactly one wins.
		b := h.leaf(t)
		w := writer(t, b)
		const n = 8
		var wg sync.WaitGroup
		var won atomic.Int32
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				data := payload(1000, byte(i))
				_, err := w.Put(ctx(t), "p/race", bytes.NewReader(data), int64(len(data)), backend.PutOptions{IfVersion: backend.VersionAbsent})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, backend.ErrPreconditionFailed):
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			failUnsupported(t, err)
			t.Errorf("create-only Put: %v (want nil or ErrPreconditionFailed)", err)
		}
		if won.Load() != 1 {
			t.Fatalf("%d of %d create-only puts succeeded, want exactly 1", won.Load(), n)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		for _, size := range []int{64 << 10, multi} {
			for _, exists := range []bool{false, true} {
				t.Run(fmt.Sprintf("size=%d/exists=%v", size, exists), func(t *testing.T) {
					b := h.leaf(t)
					w := writer(t, b)
					var before backend.ObjectInfo
					if exists {
						before = h.seed(t, b, "p/obj", payload(10, 1))
					}
					c, cancel := context.WithCancel(ctx(t))
					defer cancel()
					r := &cancelAt{r: bytes.NewReader(payload(size, 2)), at: int64(size / 2), cancel: cancel}
					_, err := w.Put(c, "p/obj", r, int64(size), backend.PutOptions{PartSize: h.PartSize, Concurrency: 1})
					failUnsupported(t, err)
					wantErr(t, "Put with a context cancelled mid-upload", err, context.Canceled)
					st, serr := b.Stat(ctx(t), "p/obj")
					if !exists {
						wantErr(t, "Stat after a cancelled create", serr, backend.ErrNotExist)
					} else if serr != nil || st.Version != before.Version {
						t.Fatalf("cancelled Put changed the object: %+v, %v; was %q", st, serr, before.Version)
					}
					want := []string{}
					if exists {
						want = []string{"p/obj"}
					}
					checkRecursive(t, b, want, "", 0)
				})
			}
		}
	})
}

// cancelAt is a ReaderAt that cancels a context once a read reaches
// offset at: the upload is under way when the context dies.
type cancelAt struct {
	r      *bytes.Reader
	at     int64
	cancel context.CancelFunc
}

func (c *cancelAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) >= c.at {
		c.cancel()
	}
	return c.r.ReadAt(p, off)
}
