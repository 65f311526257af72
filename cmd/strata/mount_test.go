package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/config"
)

// TestFailedMountLeavesNoCacheDir: a mount or warm refused after its
// cache dir was created (the source's bucket or directory is missing, the
// credentials are wrong) removed nothing: the new directory, its parents
// and the cache inside (LOCK, index, objects, staging) stayed behind. A
// cache dir that existed before is left alone.
func TestFailedMountLeavesNoCacheDir(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off") // runMount would set the test's own limit
	root := t.TempDir()
	mnt := filepath.Join(root, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := "file://" + filepath.Join(root, "no-such-dir")

	cfg := config.Defaults()
	cfg.Foreground = true
	cfg.CacheDir = filepath.Join(root, "new", "parent", "cache")
	err := runMount(&cfg, missing, mnt, false)
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("mount of a missing directory: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(root, "new")); !os.IsNotExist(serr) {
		t.Errorf("the refused mount (%v) left %s behind", err, filepath.Join(root, "new"))
	}

	cfg = config.Defaults()
	cfg.CacheDir = filepath.Join(root, "warm-cache")
	err = runWarm(context.Background(), &cfg, warmFlags{}, missing, false)
	if err == nil {
		t.Fatal("warm of a missing directory succeeded")
	}
	if _, serr := os.Stat(cfg.CacheDir); !os.IsNotExist(serr) {
		t.Errorf("the refused warm (%v) left %s behind", err, cfg.CacheDir)
	}

	// A cache dir that was there before keeps what it held.
	old := filepath.Join(root, "old")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = config.Defaults()
	cfg.Foreground = true
	cfg.CacheDir = old
	if err := runMount(&cfg, missing, mnt, false); err == nil {
		t.Fatal("mount of a missing directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(old, "keep")); err != nil {
		t.Errorf("an existing cache dir lost its files: %v", err)
	}
}
