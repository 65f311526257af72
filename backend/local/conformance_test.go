package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/backendtest"
)

func newTemp(t *testing.T) *Backend {
	t.Helper()
	b, err := New(t.TempDir(), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New:      func(t *testing.T) backend.Backend { return newTemp(t) },
		Caps:     backendtest.Caps{LongKeys: true},
		Parallel: true,
	})
}

// TestConformanceExternalWrites seeds the tree with plain file writes, so
// the read side is checked against files this package did not write.
func TestConformanceExternalWrites(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend { return newTemp(t) },
		Seed: func(t *testing.T, b backend.Backend, key string, data []byte) {
			p := filepath.Join(b.(*Backend).Root(), filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			// Write beside and rename, as a dataset writer would.
			tmp := filepath.Join(filepath.Dir(p), "seed.tmp")
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
		},
		Caps:     backendtest.Caps{LongKeys: true},
		Parallel: true,
	})
}
