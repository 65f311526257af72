package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFilesWrittenBeforeAKillAreListedOnceTheirUploadsLand: files written
// with --upload async, their uploads pending when the mount is killed
// (kill -9, the OOM killer), resumed by the next mount on the same cache
// dir, which sends them at once. As each landed, its directory's listing
// kept in the index by the killed run (written when the directory was
// made, empty) was left without it: once the uploads had landed the
// mount showed the tree as empty, every file written before the kill
// missing from readdir and ls until the metadata TTL (for good with
// --metadata-ttl indefinite), though the bucket held them all (found by
// TestRandomCallsMatchLocalDisk with restarts). A clean unmount, which
// waits for the uploads, did not show it.
func TestFilesWrittenBeforeAKillAreListedOnceTheirUploadsLand(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		cacheDir := t.TempDir()
		args := []string{"--upload", "async"}
		m := startMount(t, srv, srv.source(bucket, ""), cacheDir, args...)
		files := map[string][]byte{}
		for _, p := range []string{"run/ckpt/model.pt", "run/ckpt/optim.pt", "run/log/metrics.csv", "run/config.json"} {
			files[p] = []byte("the bytes of " + p)
			if err := os.MkdirAll(filepath.Join(m.dir, filepath.Dir(p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(m.dir, p), files[p], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m.kill9()
		m = startMount(t, srv, srv.source(bucket, ""), cacheDir, args...)
		runSync(t, m) // the resumed uploads have landed
		got := tree(t, m.dir)
		for p, b := range files {
			if got[p] != sha(b) {
				t.Errorf("%s through the mount after the restart and its upload: missing or wrong (the mount shows %d files)", p, len(got))
			}
		}
		if len(got) != len(files) {
			t.Errorf("the mount shows %d files, want %d", len(got), len(files))
		}
	})
}
