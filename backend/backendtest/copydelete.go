package backendtest

import (
	"fmt"
	"testing"

	"github.com/stratafs/strata/backend"
)

func copier(t *testing.T, b backend.Backend) backend.Copier {
	t.Helper()
	c, ok := b.(backend.Copier)
	if !ok {
		t.Fatalf("%s does not implement backend.Copier (declare Harness.ReadOnly)", b)
	}
	return c
}

func deleter(t *testing.T, b backend.Backend) backend.Deleter {
	t.Helper()
	d, ok := b.(backend.Deleter)
	if !ok {
		t.Fatalf("%s does not implement backend.Deleter (declare Harness.ReadOnly)", b)
	}
	return d
}

func testCopy(t *testing.T, h Harness) {
	data := payload(5000, 4)
	t.Run("Versions", func(t *testing.T) {
		cases := []struct {
			name    string
			pin     string // "", "current" or "stale"
			wantErr error
		}{
			{"Any", "", nil},
			{"Current", "current", nil},
			{"Stale", "stale", backend.ErrVersionChanged},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				b := h.leaf(t)
				cp := copier(t, b)
				old := h.seed(t, b, "c/src", payload(10, 1))
				src := h.seed(t, b, "c/src", data)
				pin := map[string]string{"": "", "current": src.Version, "stale": old.Version}[c.pin]
				info, err := cp.Copy(ctx(t), "c/src", pin, "c/dst")
				failUnsupported(t, err)
				if c.wantErr != nil {
					wantErr(t, "Copy pinned to a replaced version", err, c.wantErr)
					_, serr := b.Stat(ctx(t), "c/dst")
					wantErr(t, "Stat of the destination of a refused copy", serr, backend.ErrNotExist)
					return
				}
				if err != nil {
					t.Fatalf("Copy: %v", err)
				}
				st, err := b.Stat(ctx(t), "c/dst")
				if err != nil {
					t.Fatal(err)
				}
				if info.Key != "c/dst" || info.Size != int64(len(data)) || info.Version == "" || info.Version != st.Version {
					t.Fatalf("Copy returned %+v; Stat(dst) = %+v", info, st)
				}
				mustRead(t, b, "c/dst", info.Version, 0, data)
				mustRead(t, b, "c/src", src.Version, 0, data) // the source is untouched
			})
		}
	})
	t.Run("OverwriteAndEmpty", func(t *testing.T) {
		b := h.leaf(t)
		cp := copier(t, b)
		h.seed(t, b, "c/dst", payload(77, 1))
		h.seed(t, b, "c/empty", nil)
		h.seed(t, b, "c/src", data)
		for _, src := range []string{"c/src", "c/empty"} {
			info, err := cp.Copy(ctx(t), src, "", "c/dst")
			failUnsupported(t, err)
			if err != nil {
				t.Fatalf("Copy(%s): %v", src, err)
			}
			want := map[string][]byte{"c/src": data, "c/empty": nil}[src]
			if info.Size != int64(len(want)) {
				t.Fatalf("Copy(%s) size %d, want %d", src, info.Size, len(want))
			}
			mustRead(t, b, "c/dst", info.Version, 0, want)
		}
	})
	t.Run("MissingSource", func(t *testing.T) {
		b := h.leaf(t)
		cp := copier(t, b)
		h.seed(t, b, "c/other", data)
		_, err := cp.Copy(ctx(t), "c/nope", "", "c/dst")
		failUnsupported(t, err)
		wantErr(t, "Copy of a missing source", err, backend.ErrNotExist)
		_, err = b.Stat(ctx(t), "c/dst")
		wantErr(t, "Stat of the destination of a failed copy", err, backend.ErrNotExist)
	})
}

func testDelete(t *testing.T, h Harness) {
	t.Run("Existing", func(t *testing.T) {
		b := h.leaf(t)
		d := deleter(t, b)
		keys := []string{"d/a", "d/sub/b", "keep"}
		h.seedAll(t, b, keys)
		for _, k := range []string{"d/a", "d/sub/b"} {
			err := d.Delete(ctx(t), k)
			failUnsupported(t, err)
			if err != nil {
				t.Fatalf("Delete(%q): %v", k, err)
			}
			_, err = b.Stat(ctx(t), k)
			wantErr(t, fmt.Sprintf("Stat(%q) after Delete", k), err, backend.ErrNotExist)
			_, err = read(ctx(t), b, k, "", 0, 1)
			wantErr(t, fmt.Sprintf("ReadRange(%q) after Delete", k), err, backend.ErrNotExist)
		}
		// With its last key gone, a prefix disappears from listings.
		checkLevel(t, b, []string{"keep"}, "", 0)
		checkRecursive(t, b, []string{"keep"}, "", 0)
	})
	t.Run("Missing", func(t *testing.T) {
		b := h.leaf(t)
		d := deleter(t, b)
		h.seed(t, b, "d/a", []byte("x"))
		for _, k := range []string{"nope", "d/nope", "d/a/below"} {
			err := d.Delete(ctx(t), k)
			failUnsupported(t, err)
			if err != nil {
				t.Fatalf("Delete(%q) of a missing key: %v; want nil", k, err)
			}
		}
		mustRead(t, b, "d/a", "", 0, []byte("x"))
		if err := d.Delete(ctx(t), "d/a"); err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(ctx(t), "d/a"); err != nil {
			t.Fatalf("second Delete: %v", err)
		}
	})
}
