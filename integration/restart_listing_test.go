package integration

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratafs/strata/backend"
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

// refusingUploadProxy passes requests to an S3 or GCS server, answering
// every upload request 503 while refusing is set: uploads stay pending
// (retrying) for as long as a test needs, and nothing of them lands.
type refusingUploadProxy struct{ refusing atomic.Bool }

func newRefusingUploadProxy(t *testing.T, upstream string) (*refusingUploadProxy, string) {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &refusingUploadProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = p
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *refusingUploadProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.refusing.Load() && isUpload(r) {
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(
				"<Error><Code>SlowDown</Code><Message>refused by the test</Message></Error>")), Request: r}, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestADirectoryRenamedAfterAKillTakesItsResumedUploads: files written
// with --upload async, the mount killed with their uploads pending, and
// the next mount, which resumes them from its journal, renames their
// directory before they have landed (a trainer's tmp-checkpoint-N →
// checkpoint-N, replayed by a restarted job). The uploads went up under
// the old names: the renamed directory was empty once they landed, and
// the files reappeared at the old path, under whatever took its name
// since (found by TestRandomCallsMatchLocalDisk with restarts: a file
// ended at b/f2/f2/f3 instead of b/f3/f3). The rename only moved the
// files a node of this mount held, and a resumed upload has none until
// its file is looked up.
func TestADirectoryRenamedAfterAKillTakesItsResumedUploads(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		p, proxyURL := newRefusingUploadProxy(t, srv.flags()[1])
		cacheDir := t.TempDir()
		args := append(endpointOf(proxyURL), "--upload", "async", "--upload-delay", "1h")
		m := startMount(t, srv, srv.source(bucket, ""), cacheDir, args...)
		files := map[string][]byte{}
		for _, name := range []string{"model.safetensors", "optimizer.pt", "trainer_state.json"} {
			files[name] = []byte("the bytes of " + name)
		}
		if err := os.MkdirAll(filepath.Join(m.dir, "run/tmp-checkpoint-2"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(m.dir, "run/tmp-checkpoint-2", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m.kill9()
		p.refusing.Store(true) // the resumed uploads wait
		m = startMount(t, srv, srv.source(bucket, ""), cacheDir, args...)
		// One of them looked up first: the kernel holds a node for it.
		if st, err := os.Stat(filepath.Join(m.dir, "run/tmp-checkpoint-2/optimizer.pt")); err != nil || st.Size() != int64(len(files["optimizer.pt"])) {
			t.Fatalf("stat of a file whose upload was resumed: %v", err)
		}
		if err := os.Rename(filepath.Join(m.dir, "run/tmp-checkpoint-2"), filepath.Join(m.dir, "run/checkpoint-2")); err != nil {
			t.Fatal(err)
		}
		// By path, not by a walk from the root: fake-gcs-server's file
		// system backend lists no "dir/" marker, so the root shows "run"
		// only once a file under it is in the bucket.
		check := func(when string) {
			t.Helper()
			for name, b := range files {
				if got, err := os.ReadFile(filepath.Join(m.dir, "run/checkpoint-2", name)); err != nil || !bytes.Equal(got, b) {
					t.Errorf("%s: run/checkpoint-2/%s through the mount: %q, %v", when, name, got, err)
				}
			}
			ents, err := os.ReadDir(filepath.Join(m.dir, "run/checkpoint-2"))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if want := slices.Sorted(maps.Keys(files)); err != nil || !slices.Equal(names, want) {
				t.Errorf("%s: ls run/checkpoint-2: %v, %v; want %v", when, names, err, want)
			}
			if _, err := os.Stat(filepath.Join(m.dir, "run/tmp-checkpoint-2")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: run/tmp-checkpoint-2 after the rename: %v", when, err)
			}
		}
		check("before the uploads")
		p.refusing.Store(false)
		if out, err := exec.Command(binPath(t), "uploads", "--retry", m.dir).CombinedOutput(); err != nil {
			t.Fatalf("strata uploads --retry: %v\n%s", err, out)
		}
		runSync(t, m)
		check("after strata sync")
		for name, b := range files {
			if got, _, err := bucketSHA(t, w, "run/checkpoint-2/"+name); err != nil || got != sha(b) {
				t.Errorf("run/checkpoint-2/%s in the bucket: %v", name, err)
			}
			if _, _, err := bucketSHA(t, w, "run/tmp-checkpoint-2/"+name); !errors.Is(err, backend.ErrNotExist) {
				t.Errorf("run/tmp-checkpoint-2/%s is in the bucket after the rename (%v)", name, err)
			}
		}
	})
}
