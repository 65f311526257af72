package uring

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/internal/testserver"
)

// engineCase is one engine configuration the shared tests run against.
type engineCase struct {
	name string
	kind Kind
	opts Options
}

// engineCases covers both engines with defaults, and both with every
// transfer chopped into odd-sized pieces so the short-I/O continuation
// paths run on every op.
func engineCases() []engineCase {
	small := DefaultOptions()
	small.maxChunk = 1000
	tiny := DefaultOptions()
	tiny.Entries = 4 // SQ of 4, CQ and in-flight slots of 8
	three := DefaultOptions()
	three.Rings = 3
	return []engineCase{
		{"pread", KindPread, DefaultOptions()},
		{"uring", KindUring, DefaultOptions()},
		{"pread/chunk1000", KindPread, small},
		{"uring/chunk1000", KindUring, small},
		{"uring/entries4", KindUring, tiny},
		{"uring/rings3", KindUring, three},
	}
}

// newEngine builds an engine for a test and closes it at cleanup. An
// io_uring engine the kernel refuses skips the test, naming the reason
// (fails it under STRATA_E2E=1: make test runs where io_uring works).
func newEngine(t testing.TB, kind Kind, opts Options) Engine {
	t.Helper()
	e, err := New(kind, opts)
	if errors.Is(err, ErrUnavailable) {
		testserver.SkipOrFail(t, "io_uring unavailable here: %v", err)
	}
	if err != nil {
		t.Fatalf("New(%s): %v", kind, err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func forEachEngine(t *testing.T, f func(t *testing.T, e Engine)) {
	for _, c := range engineCases() {
		t.Run(c.name, func(t *testing.T) {
			f(t, newEngine(t, c.kind, c.opts))
		})
	}
}

// openTemp creates a read-write file in a temp dir and returns its fd,
// closed at cleanup.
func openTemp(t testing.TB, name string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, path
}

// model is the expected content of a file: a byte slice the size of it.
type model []byte

func (m *model) write(off int64, p []byte) {
	if end := int(off) + len(p); end > len(*m) {
		*m = append(*m, make([]byte, end-len(*m))...)
	}
	copy((*m)[off:], p)
}

// read is what a pread of n bytes at off returns: bytes up to EOF.
func (m model) read(off int64, n int) []byte {
	if off >= int64(len(m)) {
		return nil
	}
	return m[off:min(int(off)+n, len(m))]
}

// checkFile compares a file's whole content with the model.
func checkFile(t testing.TB, path string, m model) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, m) {
		t.Fatalf("file content differs from model: len %d want %d, first diff at %d",
			len(got), len(m), firstDiff(got, m))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// sizes mixes tiny, odd, page, block and multi-block transfers.
var sizes = []int{1, 17, 511, 4096, 4097, 65536 + 7, 128 << 10, 1 << 20, 3<<20 + 5}

// randPool is random bytes that payloads are cut from: generating them per
// op is slow under the race detector.
var randPool = func() []byte {
	b := make([]byte, 8<<20)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(b) // ChaCha8.Read never fails
	return b
}()

// randBytes returns n random bytes (n <= 4 MiB), a fresh copy.
func randBytes(r *rand.Rand, n int) []byte {
	off := r.IntN(len(randPool) - n)
	return bytes.Clone(randPool[off : off+n])
}

// checkOp checks a completed read against the model.
func checkRead(m model, op *Op) error {
	want := m.read(op.Off, len(op.Buf))
	if op.Err != nil {
		return fmt.Errorf("read off %d len %d: %v", op.Off, len(op.Buf), op.Err)
	}
	if op.N != len(want) || !bytes.Equal(op.Buf[:op.N], want) {
		return fmt.Errorf("read off %d len %d: got N=%d want %d (first diff %d)",
			op.Off, len(op.Buf), op.N, len(want), firstDiff(op.Buf[:op.N], want))
	}
	return nil
}
