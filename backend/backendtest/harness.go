package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// Caps declares what a backend supports beyond the contract every backend
// meets. Zero values are the conservative choice: the matching subtests
// are not run (never skipped: under `make test` a skip is a failure, and
// the suite claims nothing a backend does not declare).
type Caps struct {
	// LongKeys: 1000-byte keys made of segments of at most 200 bytes.
	LongKeys bool
	// NonPathKeys: keys that are not valid local paths: empty segments
	// ("a//b"), "." and ".." segments, a single segment of 1000 bytes.
	NonPathKeys bool
	// ControlKeys: keys holding characters XML 1.0 cannot carry (control
	// characters such as \x01 and \x1f) and ones a URL encoding must
	// round-trip ('%', '+', tab, newline), in object names and in prefixes.
	ControlKeys bool
	// FolderObjects: a "dir/" placeholder object can be written, is listed
	// as an object of its own prefix and as a prefix of its parent.
	FolderObjects bool
	// KeyAndPrefix: "k" and "k/child" can both exist.
	KeyAndPrefix bool
}

// Harness tells Run how to get backends to test.
type Harness struct {
	// New returns a fresh, empty backend for one subtest; it registers its
	// own cleanup with t.Cleanup. Required.
	New func(t *testing.T) backend.Backend
	// Seed writes data as key (creating or replacing it) by some means
	// other than the API under test. Nil means the backend's own Writer.
	Seed func(t *testing.T, b backend.Backend, key string, data []byte)
	// Caps lists optional behaviours.
	Caps Caps
	// PartSize is the smallest part size the backend accepts for a
	// multipart upload; the suite uploads objects of 2*PartSize+1234 bytes
	// with PutOptions.PartSize = PartSize to force several parts.
	// 0 means 5 MiB (the S3 minimum).
	PartSize int64
	// Parallel runs the leaf subtests in parallel.
	Parallel bool
	// ReadOnly declares a backend that does not implement Writer, Copier
	// and Deleter, or refuses them with backend.ErrNotSupported: the suite
	// checks exactly that instead of the write subtests. A backend not
	// declared ReadOnly that answers ErrNotSupported fails.
	ReadOnly bool
}

// opTimeout bounds every call the suite makes, so a hanging backend fails
// instead of stalling the test binary.
const opTimeout = 2 * time.Minute

// Run runs the whole suite. Each leaf subtest gets its own backend from
// h.New.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("backendtest: Harness.New is required")
	}
	if h.PartSize == 0 {
		h.PartSize = 5 << 20
	}
	t.Run("Stat", func(t *testing.T) { testStat(t, h) })
	t.Run("List", func(t *testing.T) { testList(t, h) })
	t.Run("OddKeys", func(t *testing.T) { testOddKeys(t, h) })
	t.Run("ReadRange", func(t *testing.T) { testReadRange(t, h) })
	t.Run("ReadHead", func(t *testing.T) { testReadHead(t, h) })
	if h.ReadOnly {
		t.Run("ReadOnly", func(t *testing.T) { testReadOnly(t, h) })
		return
	}
	t.Run("Put", func(t *testing.T) { testPut(t, h) })
	t.Run("PutStop", func(t *testing.T) { testStop(t, h) })
	t.Run("Copy", func(t *testing.T) { testCopy(t, h) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, h) })
}

// runIf runs a subtest of an optional behaviour only if the backend
// declares it.
func runIf(t *testing.T, declared bool, name string, fn func(*testing.T)) {
	t.Helper()
	if declared {
		t.Run(name, fn)
	}
}

// testReadOnly: every write the backend offers at all is refused with
// ErrNotSupported and leaves the seeded object as it was.
func testReadOnly(t *testing.T, h Harness) {
	b := h.leaf(t)
	data := payload(100, 9)
	h.seed(t, b, "ro", data)
	c := ctx(t)
	var errs []error
	if w, ok := b.(backend.Writer); ok {
		_, err := w.Put(c, "ro", bytes.NewReader([]byte("x")), 1, backend.PutOptions{})
		errs = append(errs, err)
	}
	if cp, ok := b.(backend.Copier); ok {
		_, err := cp.Copy(c, "ro", "", "ro-copy")
		errs = append(errs, err)
	}
	if d, ok := b.(backend.Deleter); ok {
		errs = append(errs, d.Delete(c, "ro"))
	}
	for i, err := range errs {
		if !errors.Is(err, backend.ErrNotSupported) {
			t.Errorf("write %d of a ReadOnly backend: %v, want ErrNotSupported", i, err)
		}
	}
	mustRead(t, b, "ro", "", 0, data)
	if _, err := b.Stat(c, "ro-copy"); !errors.Is(err, backend.ErrNotExist) {
		t.Errorf("Stat of a copy a ReadOnly backend refused: %v, want ErrNotExist", err)
	}
}

// leaf starts a leaf subtest: parallel if asked, with a fresh backend.
func (h Harness) leaf(t *testing.T) backend.Backend {
	t.Helper()
	if h.Parallel {
		t.Parallel()
	}
	b := h.New(t)
	if b == nil {
		t.Fatal("backendtest: Harness.New returned nil")
	}
	return b
}

// ctx returns a context bounded by opTimeout and cancelled with the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return c
}

// seed writes key through h.Seed or the backend's Writer and returns the
// object's Stat.
func (h Harness) seed(t *testing.T, b backend.Backend, key string, data []byte) backend.ObjectInfo {
	t.Helper()
	if h.Seed != nil {
		h.Seed(t, b, key, data)
	} else {
		w, ok := b.(backend.Writer)
		if !ok {
			t.Fatalf("backendtest: %s has no Writer and the harness has no Seed", b)
		}
		if _, err := w.Put(ctx(t), key, bytes.NewReader(data), int64(len(data)), backend.PutOptions{}); err != nil {
			t.Fatalf("seed %q: %v", key, err)
		}
	}
	info, err := b.Stat(ctx(t), key)
	if err != nil {
		t.Fatalf("stat %q after seeding: %v", key, err)
	}
	return info
}

// seedAll seeds every key with payload(len, i).
func (h Harness) seedAll(t *testing.T, b backend.Backend, keys []string) map[string][]byte {
	t.Helper()
	m := make(map[string][]byte, len(keys))
	for i, k := range keys {
		data := payload(10+i*7, byte(i))
		h.seed(t, b, k, data)
		m[k] = data
	}
	return m
}

// writer returns b's Writer; a backend not declared ReadOnly must have one.
func writer(t *testing.T, b backend.Backend) backend.Writer {
	t.Helper()
	w, ok := b.(backend.Writer)
	if !ok {
		t.Fatalf("%s does not implement backend.Writer (declare Harness.ReadOnly)", b)
	}
	return w
}

// failUnsupported fails the test when a backend not declared ReadOnly
// reports at run time that it lacks a write operation.
func failUnsupported(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, backend.ErrNotSupported) {
		t.Fatalf("operation not supported: %v (declare Harness.ReadOnly)", err)
	}
}

// read opens a range and reads it all. An error from ReadRange, Read or
// Close is returned, with the bytes read so far.
func read(ctx context.Context, b backend.Backend, key, version string, off, n int64) ([]byte, error) {
	rc, err := b.ReadRange(ctx, key, version, off, n)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return data, err
}

// mustRead reads a range and compares it with want.
func mustRead(t *testing.T, b backend.Backend, key, version string, off int64, want []byte) {
	t.Helper()
	got, err := read(ctx(t), b, key, version, off, int64(len(want)))
	if err != nil {
		t.Fatalf("ReadRange(%q, %q, %d, %d): %v", key, version, off, len(want), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ReadRange(%q, %q, %d, %d): got %d bytes %s, want %d bytes %s",
			key, version, off, len(want), len(got), head(got), len(want), head(want))
	}
}

// wantErr fails unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want errors.Is(err, %q)", what, err, target)
	}
}

// payload returns n deterministic pseudo-random bytes (xorshift).
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func head(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%x...", b[:16])
	}
	return fmt.Sprintf("%x", b)
}
