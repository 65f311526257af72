package mount

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/config"
)

// TestPrepareRefusesSourceAroundMount: a file:// source that holds the
// mountpoint shows the mount inside itself (the daemon walked its own
// mount, kept it busy and umount failed), one inside the mountpoint is
// hidden by the mount, and one holding the cache dir serves (and lets
// writes into) the mount's own cache. Each is refused before anything is
// created, with the flag or argument to change.
func TestPrepareRefusesSourceAroundMount(t *testing.T) {
	root := t.TempDir()
	src := filepath.Join(root, "src")
	mnt := filepath.Join(root, "mnt")
	for _, d := range []string{src, mnt, filepath.Join(src, "mnt")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, source, mnt, cache, want string
	}{
		{"mountpoint inside the source", "file://" + src, filepath.Join(src, "mnt"), filepath.Join(root, "c1"), "inside the source"},
		{"mountpoint is the source", "file://" + src, src, filepath.Join(root, "c2"), "is the source"},
		{"source inside the mountpoint", "file://" + filepath.Join(src, "mnt"), src, filepath.Join(root, "c3"), "inside the mountpoint"},
		{"source through a symlink holds the mountpoint", "file://" + link, mnt, filepath.Join(root, "c4"), "inside the source"},
		{"cache dir inside the source", "file://" + src, mnt, filepath.Join(src, "cache"), "--cache-dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.CacheDir = tc.cache
			_, _, err := Prepare(&cfg, tc.source, tc.mnt)
			if err == nil {
				t.Fatalf("Prepare(%s, %s, cache %s) succeeded", tc.source, tc.mnt, tc.cache)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line mentioning %q", err, tc.want)
			}
			if _, err := os.Stat(tc.cache); !os.IsNotExist(err) {
				t.Errorf("refused Prepare left %s behind (%v)", tc.cache, err)
			}
		})
	}
	// Side by side is fine, and so are buckets whatever the paths.
	cfg := config.Defaults()
	cfg.CacheDir = filepath.Join(root, "cache")
	if _, _, err := Prepare(&cfg, "file://"+src, mnt); err != nil {
		t.Errorf("source, mountpoint and cache dir side by side: %v", err)
	}
	cfg = config.Defaults()
	cfg.CacheDir = filepath.Join(root, "cache-s3")
	if _, _, err := Prepare(&cfg, "s3://bucket", filepath.Join(src, "mnt")); err != nil {
		t.Errorf("s3 source: %v", err)
	}
}
