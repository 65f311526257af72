package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stratafs/strata/backend"
)

// TestFilesCreatedInANewDirectoryAskTheBucketNothing: the Hugging Face
// Trainer makes tmp-checkpoint-N/ and creates its files in it. Each
// create's lookup of the new name used to ask the bucket (a HEAD and a
// LIST, a round trip each at 20 ms); the mkdir now lists the new
// directory while its marker is put, so those lookups are answered from
// that listing. A directory made over keys the mount did not know of
// (another client wrote them) still shows them, and every file written
// reaches the bucket whole.
func TestFilesCreatedInANewDirectoryAskTheBucketNothing(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		for _, mode := range []string{"sync", "async"} {
			t.Run(mode, func(t *testing.T) {
				bucket := srv.newBucket(t)
				w := srv.writer(t, bucket)
				addr := metricsAddr(t)
				m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr,
					"--upload", mode, "--upload-delay", "0")
				// The root is listed (as the trainer's earlier steps
				// did), then another client writes under a name this
				// mount has not seen yet.
				if _, err := os.ReadDir(m.dir); err != nil {
					t.Fatal(err)
				}
				put(t, w, map[string][]byte{"theirs/a": []byte("written elsewhere")})

				asked := func() float64 {
					fams := scrape(t, addr)
					var n float64
					for _, op := range []string{"list", "stat", "read_head"} {
						n += metric(fams, "strata_backend_requests_total", map[string]string{"op": op})
					}
					return n
				}
				tmp := filepath.Join(m.dir, "tmp-checkpoint-1")
				if err := os.Mkdir(tmp, 0o755); err != nil {
					t.Fatal(err)
				}
				before := asked()
				want := map[string][]byte{}
				for i, name := range []string{"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"} {
					data := bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
					if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
					want["tmp-checkpoint-1/"+name] = data
				}
				if n := asked() - before; n != 0 {
					t.Errorf("creating 5 files in a directory just made sent %v lookups or listings to the bucket, want 0", n)
				}

				// mkdir over keys another client wrote since the root was
				// listed: the directory shows them.
				theirs := filepath.Join(m.dir, "theirs")
				if err := os.Mkdir(theirs, 0o755); err != nil && !os.IsExist(err) {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(theirs, "a"))
				if err != nil || string(got) != "written elsewhere" {
					t.Fatalf("theirs/a through the mount: %q, %v", got, err)
				}

				ents, err := os.ReadDir(tmp)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				sort.Strings(names)
				if fmt.Sprint(names) != "[model.safetensors optimizer.pt rng_state.pth scheduler.pt trainer_state.json]" {
					t.Errorf("ls tmp-checkpoint-1: %v", names)
				}
				if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
					t.Fatalf("strata sync: %v\n%s", err, errOut)
				}
				for k, data := range want {
					if got, _, err := bucketSHA(t, w, k); err != nil || got != sha(data) {
						t.Errorf("%s in the bucket: sha %s, %v; want %s", k, got, err, sha(data))
					}
				}
			})
		}
	})
}

// TestRenamingUnsentFilesDeletesNothing: with --upload async the
// Trainer's files are still staged when tmp-checkpoint-N/ is renamed. The
// rename moves their journal entries, and used to DELETE each one's old
// key as well, one round trip after another, although nothing of a file
// created here and not yet sent can be there. Only the directory's
// marker, which is in the bucket, is copied and deleted. A file whose
// upload did land keeps its old object deleted.
func TestRenamingUnsentFilesDeletesNothing(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		addr := metricsAddr(t)
		m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr,
			"--upload", "async", "--upload-delay", "1h")
		deletes := func() float64 {
			return metric(scrape(t, addr), "strata_backend_requests_total", map[string]string{"op": "delete"})
		}
		// One file that is in the bucket before the rename.
		landed := filepath.Join(m.dir, "tmp-checkpoint-1", "landed.json")
		if err := os.Mkdir(filepath.Dir(landed), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(landed, []byte(`{"step": 1}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
			t.Fatalf("strata sync: %v\n%s", err, errOut)
		}
		want := map[string]string{"checkpoint-1/landed.json": sha([]byte(`{"step": 1}`))}
		for i, name := range []string{"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"} {
			data := []byte(fmt.Sprintf("%s of step 1, %d", name, i))
			if err := os.WriteFile(filepath.Join(m.dir, "tmp-checkpoint-1", name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			want["checkpoint-1/"+name] = sha(data)
		}
		// fake-gcs-server on its file system keeps no "dir/" marker.
		wantDeletes := 1.0
		if _, err := w.(backend.Backend).Stat(context.Background(), "tmp-checkpoint-1/"); err == nil {
			wantDeletes++
		}
		before := deletes()
		if err := os.Rename(filepath.Join(m.dir, "tmp-checkpoint-1"), filepath.Join(m.dir, "checkpoint-1")); err != nil {
			t.Fatal(err)
		}
		// landed.json and the marker are in the bucket: their deletes.
		if n := deletes() - before; n != wantDeletes {
			t.Errorf("the rename sent %v DELETEs, want %v (the file that had landed, and the directory's marker)", n, wantDeletes)
		}
		if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
			t.Fatalf("strata sync: %v\n%s", err, errOut)
		}
		for k, sum := range want {
			if got, _, err := bucketSHA(t, w, k); err != nil || got != sum {
				t.Errorf("%s in the bucket: %s, %v; want %s", k, got, err, sum)
			}
		}
		page, err := w.(backend.Backend).List(context.Background(), "tmp-checkpoint-1/", backend.ListOptions{Recursive: true})
		if err != nil || len(page.Objects) != 0 {
			t.Errorf("left under tmp-checkpoint-1/: %v, %v", page.Objects, err)
		}
		if info, err := w.(backend.Backend).Stat(context.Background(), "tmp-checkpoint-1/"); err == nil {
			t.Errorf("the old directory's marker is still in the bucket: %+v", info)
		}
	})
}
