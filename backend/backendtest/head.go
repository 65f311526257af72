package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stratafs/strata/backend"
)

// testReadHead: a backend that offers ReadHead answers as Stat does, with
// the object's first bytes; one without it (or a wrapper of one, which
// says ErrNotSupported) is left alone.
func testReadHead(t *testing.T, h Harness) {
	b := h.leaf(t)
	hr, ok := b.(backend.HeadReader)
	if !ok {
		t.Logf("%s has no ReadHead", b)
		return
	}
	const n = 4096
	for _, size := range []int{0, 1, 1234, n, n + 1, 300_000} {
		key := fmt.Sprintf("h/obj-%d", size)
		data := payload(size, 3)
		want := h.seed(t, b, key, data)
		info, head, err := hr.ReadHead(ctx(t), key, n)
		if errors.Is(err, backend.ErrNotSupported) && size == 0 {
			t.Logf("%s wraps a backend without ReadHead", b)
			return
		}
		if err != nil {
			t.Fatalf("ReadHead(%q): %v", key, err)
		}
		if info.Key != key || info.Size != want.Size || info.Version != want.Version || !info.MTime.Equal(want.MTime) {
			t.Fatalf("ReadHead(%q) = %+v, Stat said %+v", key, info, want)
		}
		if !bytes.Equal(head, data[:min(n, size)]) {
			t.Fatalf("ReadHead(%q) gave %d bytes, not the object's first %d", key, len(head), min(n, size))
		}
	}
	for _, key := range []string{"nope", "h", "h/obj-1/x"} {
		if _, _, err := hr.ReadHead(ctx(t), key, n); !errors.Is(err, backend.ErrNotExist) {
			t.Fatalf("ReadHead(%q) of a missing key: %v, want ErrNotExist", key, err)
		}
	}
}
