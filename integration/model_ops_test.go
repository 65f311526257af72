package integration

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
)

// snapshot maps every path under root to "dir" or its content's digest.
func snapshot(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = digest(b)
		return nil
	})
	return out, err
}

func diffSnapshots(want, got map[string]string) string {
	var d []string
	for k, v := range want {
		if got[k] != v {
			d = append(d, fmt.Sprintf("%s: want %s, got %q", k, v, got[k]))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s: not on local disk, got %s", k, v))
		}
	}
	slices.Sort(d)
	return strings.Join(d, "\n")
}

// bucketSnapshot maps every object under prefix (markers left out) to
// its content's digest, read straight from the bucket.
func bucketSnapshot(t *testing.T, w backend.Writer, prefix string) map[string]string {
	t.Helper()
	be := w.(backend.Backend)
	ctx := context.Background()
	out := map[string]string{}
	opt := backend.ListOptions{Recursive: true}
	for {
		page, err := be.List(ctx, prefix, opt)
		if err != nil {
			t.Fatalf("listing %s: %v", prefix, err)
		}
		for _, o := range page.Objects {
			if strings.HasSuffix(o.Key, "/") {
				continue
			}
			var b []byte
			if o.Size > 0 {
				rc, err := be.ReadRange(ctx, o.Key, "", 0, o.Size)
				if err != nil {
					t.Fatalf("reading %s: %v", o.Key, err)
				}
				b, err = io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatalf("reading %s: %v", o.Key, err)
				}
			}
			out[strings.TrimPrefix(o.Key, prefix)] = digest(b)
		}
		if page.Next == "" {
			return out
		}
		opt.Token = page.Next
	}
}

func filesOnly(s map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range s {
		if v != "dir" {
			out[k] = v
		}
	}
	return out
}

// TestRandomCallsMatchLocalDisk plays random sequences of open, pwrite
// (one in four by a child process through a descriptor it inherits),
// pread, close, ftruncate, truncate by path, fsync of a file and of a
// directory, dup, rename, unlink, mkdir, rmdir, stat, readdir and
// whole-file reads on local disk and on the mount side by side, with
// restarts of the mount now and then (every descriptor closed, the mount
// unmounted or killed with SIGKILL, and mounted again on its cache dir), in both upload modes (async also with no upload delay), with
// the page cache and dentries dropped now and then, `strata sync` and
// `strata uploads --retry` run on the mount now and then (they inherit
// the dup'd descriptors, as a subprocess does), and now and then offsets
// and sizes around the cache's 1 MiB block boundary: every call must give
// what local disk gives (errno, bytes, sizes, listings), then the mount,
// the bucket after `strata sync` and a new mount of the bucket must hold
// what local disk holds. The one difference allowed is the README's: a
// descriptor opened only for reading, before another one wrote, may keep
// the version it opened (its errno is compared, not its bytes).
//
// Seeds 1 to 6, 500 calls each, in `make test`, on MinIO and on
// fake-gcs-server (its memory backend: the file system one keeps no
// "dir/" marker, so an empty directory would not survive the new mount):
// the same calls every run. To look further: STRATA_MODEL_SEED (the first
// seed), STRATA_MODEL_SEEDS (how many), STRATA_MODEL_STEPS (calls per
// seed), STRATA_MODEL_MORE=0 (without the calls added after the first
// runs: child writes, truncations by path, fsyncs of directories and
// restarts; the seeds then play what they played before),
// STRATA_MODEL_BACKENDS ("minio fakegcs"), STRATA_MODEL_MODES
// ("sync async async-nodelay"; the last is async with --upload-delay 0,
// where every upload starts at its file's last close and so meets the
// calls that follow). A difference names its seed and writes every call
// made to a file. Before the fixes it came with, seeds 1 to 20 found ten
// defects: a rename onto itself deleting the file, a lookup giving a file
// being written its old size (the next append overwrote it), a directory
// made again at a renamed one's old name sharing its inode, a directory
// rename moving a file renamed out of it earlier, the descriptors of a
// file whose name went losing its bytes (ESTALE) or uploading it over the
// file that took the name, and files missing from readdir while their
// listing loaded. The third mode and the strata commands then found five
// more: a gone file's last close and a retry each starting a held upload
// half written, a deleted file coming back from an upload superseded in
// flight, a subprocess's exit taken for a killed writer, and a lookup
// during a listing load answering with the version listed before an
// upload landed. Seeds 21 to 50 then found a descriptor of a file whose
// name went losing its bytes 5 s later (ESTALE), and the restarts a tree
// written before a kill -9 showing empty once its uploads had landed at
// the next mount, and, with seed 5 of `sync` on fake-gcs-server, 2 runs
// in about 20, a file read at the size its fsync had uploaded, not the
// smaller one its ftruncate and close had uploaded since (the landed
// upload's journal entry went before the namespace heard of it); and,
// in one fresh-clone run, seed 1 of `async` on fake-gcs-server the
// bucket after `strata sync` without a file's last truncation
// (open(O_TRUNC) and close, no write: uploaded at the file's RELEASE,
// which came after the sync had looked).
func TestRandomCallsMatchLocalDisk(t *testing.T) {
	requireFUSE(t)
	knob := func(name string, def uint64) uint64 {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", name, s, err)
		}
		return v
	}
	seeds, steps, base := knob("STRATA_MODEL_SEEDS", 6), int(knob("STRATA_MODEL_STEPS", 500)), knob("STRATA_MODEL_SEED", 1)
	more := knob("STRATA_MODEL_MORE", 1) != 0
	backends := map[string]func(*testing.T) server{"minio": startMinIO, "fakegcs": startFakeGCSMemory}
	names := []string{"minio", "fakegcs"}
	if s := os.Getenv("STRATA_MODEL_BACKENDS"); s != "" {
		names = strings.Fields(s)
	}
	modes := []string{"sync", "async", "async-nodelay"}
	if s := os.Getenv("STRATA_MODEL_MODES"); s != "" {
		modes = strings.Fields(s)
	}
	for _, backend := range names {
		start, ok := backends[backend]
		if !ok {
			t.Fatalf("STRATA_MODEL_BACKENDS: %q is not one of minio, fakegcs", backend)
		}
		t.Run(backend, func(t *testing.T) { modelRuns(t, start(t), modes, base, seeds, steps, more) })
	}
}

// modelRuns plays the seeds in each upload mode on one backend; with
// more, also child writes, truncations by path, fsyncs of directories
// and restarts (the mount unmounted or killed, and mounted again on its
// cache dir).
func modelRuns(t *testing.T, srv server, modes []string, base, seeds uint64, steps int, more bool) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			args := []string{"--upload", mode}
			if mode == "async-nodelay" { // every upload starts at its last close
				args = []string{"--upload", "async", "--upload-delay", "0"}
			}
			cacheDir := t.TempDir()
			m := startMount(t, srv, srv.source(bucket, ""), cacheDir, args...)
			for seed := base; seed < base+seeds; seed++ {
				name := fmt.Sprintf("seed%d", seed)
				local := filepath.Join(t.TempDir(), name)
				mnt := filepath.Join(m.dir, name)
				for _, root := range []string{local, mnt} {
					if err := os.Mkdir(root, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				r := &modelRun{rng: rand.New(rand.NewPCG(seed, 7)), local: local, mnt: mnt, drop: func() { dropCaches(t) },
					strata: func(args ...string) error {
						out, err := exec.Command(binPath(t), append(args, m.dir)...).CombinedOutput()
						if err != nil {
							return fmt.Errorf("%w: %s", err, out)
						}
						return nil
					}}
				r.more = more
				if more {
					r.restart = func(kill bool) (string, error) {
						if kill {
							m.kill9()
						} else {
							m.unmount()
						}
						again, out, err := tryMount(t, srv, srv.source(bucket, ""), cacheDir, args...)
						if err != nil {
							return "", fmt.Errorf("%w: %s", err, out)
						}
						m = again
						return filepath.Join(m.dir, name), nil
					}
				}
				failed := func(what string) {
					all := filepath.Join(os.TempDir(), fmt.Sprintf("strata-model-%s-%s-seed%d.log", srv.name(), mode, seed))
					_ = os.WriteFile(all, []byte(strings.Join(r.log, "\n")+"\n"+what+"\n"), 0o644)
					if b, err := os.ReadFile(filepath.Join(m.cacheDir, "strata.log")); err == nil { // the daemon's side
						_ = os.WriteFile(strings.TrimSuffix(all, ".log")+".daemon.log", b, 0o644)
					}
					t.Errorf("seed %d, call %d: %s\nthe last calls (all in %s, the daemon's log beside it; again: STRATA_MODEL_BACKENDS=%s STRATA_MODEL_MODES=%s STRATA_MODEL_MORE=%d STRATA_MODEL_SEED=%d STRATA_MODEL_SEEDS=1):\n%s",
						seed, len(r.log), what, all, srv.name(), mode, map[bool]int{true: 1}[more], seed, strings.Join(r.log[max(0, len(r.log)-40):], "\n"))
				}
				diff := ""
				for i := 0; i < steps && diff == ""; i++ {
					diff = r.step()
				}
				if diff == "" {
					diff = r.closeAll()
				}
				if diff != "" {
					failed(diff)
					r.closeAll()
					continue
				}
				want, err := snapshot(local)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := snapshot(r.mnt); err != nil || diffSnapshots(want, got) != "" {
					failed(fmt.Sprintf("the mount's tree (%v):\n%s", err, diffSnapshots(want, got)))
					continue
				}
				strataSync(t, srv, m)
				if d := diffSnapshots(filesOnly(want), bucketSnapshot(t, w, name+"/")); d != "" {
					failed("the bucket after strata sync:\n" + d)
					continue
				}
				again := startMount(t, srv, srv.source(bucket, name), "")
				got, err := snapshot(again.dir)
				if err == nil {
					if gone := dropMinIOPhantoms(t, srv, w, bucket, name+"/", want, got); len(gone) > 0 {
						t.Logf("seed %d: MinIO lists %v with no object under it (minio/minio#21268); left out of the comparison", seed, gone)
					}
				}
				if err != nil || diffSnapshots(want, got) != "" {
					failed(fmt.Sprintf("a new mount of the bucket (%v):\n%s", err, diffSnapshots(want, got)))
				}
				again.unmount()
			}
		})
	}
}
