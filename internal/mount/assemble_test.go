package mount

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/warm"
)

// TestOpenWarmsWithoutFUSE: Open builds the mount's stack without FUSE
// (what an offline `strata warm` uses), owns the cache dir while open
// (a second Open is refused, saying who holds it and what to do), and
// Close releases it.
func TestOpenWarmsWithoutFUSE(t *testing.T) {
	src := t.TempDir()
	for name, n := range map[string]int{"a.bin": 3 << 20, "d/b.bin": 100} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Defaults()
	cfg.CacheDir = filepath.Join(t.TempDir(), "cache")
	s, err := config.ParseSource("file://" + src)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	m, err := Open(context.Background(), Options{Config: &cfg, Source: s, Owner: "warm test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mountpoint() != "" || m.mounted != nil || m.fsys != nil {
		t.Errorf("Open mounted something")
	}
	p, err := m.WarmJob(warm.Request{Concurrency: 2}).Run(context.Background(), nil)
	if err != nil || p.Objects != 2 || p.DoneBytes != 3<<20+100 {
		t.Fatalf("warm: %+v, %v", p, err)
	}

	again := cfg
	_, err = Open(context.Background(), Options{Config: &again, Source: s, Owner: "second", Logger: log})
	if !errors.Is(err, cache.ErrLocked) || !strings.Contains(err.Error(), "warm test") || !strings.Contains(err.Error(), "retry once it is done") {
		t.Errorf("second Open: %v; want the cache dir held by \"warm test\", with what to do", err)
	}
	m.Close()
	m2, err := Open(context.Background(), Options{Config: &again, Source: s, Owner: "third", Logger: log})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	p, err = m2.WarmJob(warm.Request{Concurrency: 2}).Run(context.Background(), nil)
	m2.Close()
	if err != nil || p.Skipped != 3<<20+100 {
		t.Errorf("warm again: %+v, %v; want everything already cached", p, err)
	}
}
