package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// treeOf is every path under dir, directories with a trailing "/".
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestRenamedDirectoryKeepsItsTree: mv of a directory moves its whole
// tree, empty subdirectories included, and leaves nothing under the old
// name, also when its files are not uploaded yet (--upload async: the
// Hugging Face Trainer's tmp-checkpoint-N) and on a file:// source, whose
// directories are directories, not marker objects. Seen before the fix on
// file://: the empty subdirectory was missing under the new name and stayed
// under the old one, and a directory renamed before its files' uploads
// left its whole tree of (now empty) directories behind.
func TestRenamedDirectoryKeepsItsTree(t *testing.T) {
	requireFUSE(t)
	for _, s := range []struct {
		name  string
		start func(t *testing.T) server
	}{{"file", func(t *testing.T) server { return &localSource{t.TempDir()} }}, {"minio", startMinIO}} {
		for _, mode := range []string{"sync", "async"} {
			t.Run(s.name+"/"+mode, func(t *testing.T) {
				srv := s.start(t)
				bucket := srv.newBucket(t)
				m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
				for _, d := range []string{"a/empty", "a/full/deep", "a/only/empty"} {
					if err := os.MkdirAll(filepath.Join(m.dir, d), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				for _, f := range []string{"a/full/f", "a/full/deep/g"} {
					if err := os.WriteFile(filepath.Join(m.dir, f), []byte(f), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Rename(filepath.Join(m.dir, "a"), filepath.Join(m.dir, "b")); err != nil {
					t.Fatal(err)
				}
				runSync(t, m)
				want := []string{"b/", "b/empty/", "b/full/", "b/full/deep/", "b/full/deep/g", "b/full/f", "b/only/", "b/only/empty/"}
				if got := treeOf(t, m.dir); !slices.Equal(got, want) {
					t.Errorf("the mount after mv a b:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
				}
				m.unmount()
				// What the bucket holds, seen by a new mount with a new cache.
				again := startMount(t, srv, srv.source(bucket, ""), "", "--read-only")
				if got := treeOf(t, again.dir); !slices.Equal(got, want) {
					t.Errorf("a new mount of the bucket after mv a b:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
				}
			})
		}
	}
}

// TestARenamedDirectoryIsOneInodeOnceTheCachesAreDropped: a renamed
// directory's node, forgotten by the kernel (drop_caches, memory
// pressure), was numbered from its new name by the next lookup, so
// stat(2) before the drop and fstat(2) of an open after it saw two
// inodes. Python's shutil.rmtree compares exactly those (lstat, open,
// fstat) to refuse a symlink swapped in, and failed the Hugging Face
// Trainer's removal of an old checkpoint with "Cannot call rmtree on a
// symbolic link" while another job dropped the caches (seen in
// TestHuggingFacePatternSurvivesKill9 beside the benchmarks).
func TestARenamedDirectoryIsOneInodeOnceTheCachesAreDropped(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "async")
	tmp, final := filepath.Join(m.dir, "tmp-checkpoint-1"), filepath.Join(m.dir, "checkpoint-1")
	if err := os.MkdirAll(filepath.Join(tmp, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "sub", "model.safetensors"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{final, filepath.Join(final, "sub")} {
		before, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		dropCaches(t)
		d, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		after, err := d.Stat()
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(before, after) {
			t.Errorf("%s: inode %d before the caches were dropped, %d after", p,
				before.Sys().(*syscall.Stat_t).Ino, after.Sys().(*syscall.Stat_t).Ino)
		}
	}
	out, err := exec.Command("python3", "-c", "import shutil, sys; shutil.rmtree(sys.argv[1])", final).CombinedOutput()
	if err != nil {
		t.Fatalf("shutil.rmtree: %v\n%s", err, out)
	}
	if got := treeOf(t, m.dir); len(got) != 0 {
		t.Errorf("the mount holds %q after rmtree", got)
	}
}
