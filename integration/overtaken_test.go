package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// lateUploadProxy passes requests to an S3 or GCS server and, once
// armed, holds the next upload request (received whole) for a while
// before the server sees it, and then sends it on even if the client has
// given up: the request a client cancels after sending it can still
// reach the bucket later, from a network or server queue.
type lateUploadProxy struct {
	hold time.Duration
	mu   sync.Mutex
	arm  *string       // the key to hold the next upload of ("": any), nil when not armed
	lose string        // how the held request's answer is lost: "cut" (the connection), "502" (a gateway's error), "late" (held as long again after the server stored it), "" (it is not)
	sent chan struct{} // one value per held request
	done chan error    // the held request's outcome at the server
	// refuse: every DELETE is answered 503 while set, as by a bucket
	// out of reach for a moment.
	refuse   atomic.Bool
	refusals atomic.Int64 // DELETEs refused so
	// forbid: every DELETE is answered 403 AccessDenied while set, as
	// for credentials without delete rights.
	forbid atomic.Bool
}

func newLateUploadProxy(t *testing.T, upstream string, hold time.Duration) (*lateUploadProxy, string) {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &lateUploadProxy{hold: hold, sent: make(chan struct{}, 1), done: make(chan error, 1)}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = p
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// armFor holds the next upload of key ("": of any key).
func (p *lateUploadProxy) armFor(key string) { p.armTo(key, "") }

// armTo holds the next upload of key ("": of any key) and loses the
// server's answer to it as lose says (see lateUploadProxy.lose).
func (p *lateUploadProxy) armTo(key, lose string) {
	p.mu.Lock()
	p.arm, p.lose = &key, lose
	p.mu.Unlock()
}

// take reports whether r, with body, is the upload to hold, and whether
// its answer is to be lost, and disarms.
func (p *lateUploadProxy) take(r *http.Request, body []byte) (held bool, lose string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.arm == nil {
		return false, ""
	}
	key := *p.arm
	// S3 names the key in the path, a GCS one-shot upload in its metadata.
	if key != "" && !strings.HasSuffix(r.URL.Path, "/"+key) && !bytes.Contains(body, []byte(`"name":"`+key+`"`)) {
		return false, ""
	}
	p.arm = nil
	return true, p.lose
}

func (p *lateUploadProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodDelete && p.refuse.Load() {
		p.refusals.Add(1)
		return refused(r, http.StatusServiceUnavailable, "ServiceUnavailable"), nil
	}
	if r.Method == http.MethodDelete && p.forbid.Load() {
		p.refusals.Add(1)
		return refused(r, http.StatusForbidden, "AccessDenied"), nil
	}
	if !isUpload(r) || r.Body == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	held, lose := p.take(r, body)
	if !held {
		return http.DefaultTransport.RoundTrip(r)
	}
	late := r.Clone(context.WithoutCancel(r.Context()))
	late.Body = io.NopCloser(bytes.NewReader(body))
	p.sent <- struct{}{}
	time.Sleep(p.hold)
	resp, err := http.DefaultTransport.RoundTrip(late)
	if err == nil && resp.StatusCode/100 != 2 {
		err = errors.New(resp.Status)
	}
	p.done <- err
	if lose == "late" {
		time.Sleep(p.hold) // the object is in the bucket; the client hears of it later
		return resp, err
	}
	if lose != "" && err == nil {
		resp.Body.Close()
		if lose == "cut" {
			panic(http.ErrAbortHandler) // the proxy's server drops the connection
		}
		return nil, errors.New("the answer was lost") // the reverse proxy answers 502
	}
	return resp, err
}

// isUpload: an S3 PutObject or CompleteMultipartUpload, or a GCS upload
// request (one-shot or a resumable session's last chunk).
func isUpload(r *http.Request) bool {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPut && !q.Has("partNumber") && r.Header.Get("X-Amz-Copy-Source") == "":
		return !strings.HasPrefix(r.URL.Path, "/upload/") || q.Has("upload_id")
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return true
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/"):
		return q.Get("uploadType") == "multipart"
	}
	return false
}

// waitSent waits for the armed upload request to be sent whole.
func (p *lateUploadProxy) waitSent(t *testing.T) {
	t.Helper()
	select {
	case <-p.sent:
	case <-time.After(30 * time.Second):
		t.Fatal("no upload was sent")
	}
}

// waitDone waits for the held request to reach the server, and fails
// the test if the server did not store the object.
func (p *lateUploadProxy) waitDone(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("the held upload failed at the server: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held upload never reached the server")
	}
}

// TestUploadOvertakenInFlightLeavesNoObject: a file renamed or deleted
// while its upload request is on its way, and the request reaches the
// bucket after the rename or delete returned. The bucket must end as the calls left
// the namespace: the renamed file under its new name only, the deleted
// one gone. Cancelling the request at that point lost its answer, and
// the object stayed under the old name for good (README's known gap
// before this test). So too when the bucket stores the request and its
// answer is lost (-answer-cut, -answer-502, and a discard's, below).
func TestUploadOvertakenInFlightLeavesNoObject(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		w := srv.writer(t, bucket)
		endpoint := srv.flags()[1]
		p, proxyURL := newLateUploadProxy(t, endpoint, 2*time.Second)
		m := startMount(t, srv, srv.source(bucket, ""), "", append(endpointOf(proxyURL), "--upload", "async", "--upload-delay", "0")...)
		data := []byte(`{"step": 1}`)

		// gone waits until key is not in the bucket.
		gone := func(t *testing.T, key string) {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, _, err := bucketSHA(t, w, key)
				if errors.Is(err, backend.ErrNotExist) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s is still in the bucket 20 s after its file was renamed or deleted (%v)", key, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}

		for _, lose := range []string{"", "cut", "502"} {
			t.Run(strings.TrimSuffix("rename-answer-"+lose, "-answer-"), func(t *testing.T) {
				p.armTo("", lose)
				if err := os.WriteFile(filepath.Join(m.dir, "state.json.tmp"), data, 0o644); err != nil {
					t.Fatal(err)
				}
				p.waitSent(t)
				if err := os.Rename(filepath.Join(m.dir, "state.json.tmp"), filepath.Join(m.dir, "state.json")); err != nil {
					t.Fatal(err)
				}
				p.waitDone(t)
				runSync(t, m)
				gone(t, "state.json.tmp")
				if got, _, err := bucketSHA(t, w, "state.json"); err != nil || got != sha(data) {
					t.Fatalf("state.json in the bucket: %v", err)
				}
				if b, err := os.ReadFile(filepath.Join(m.dir, "state.json")); err != nil || !bytes.Equal(b, data) {
					t.Fatalf("state.json through the mount: %q, %v", b, err)
				}
			})
		}
		// A file uploaded whole is renamed over a name whose upload
		// (of a file renamed there before it went up, so unconditional)
		// is on its way: the rename's server-side copy must be what the
		// name holds in the end, not the replaced file's late object,
		// and not nothing (the late object taken down after the copy).
		t.Run("rename-over", func(t *testing.T) {
			m := startMount(t, srv, srv.source(bucket, ""), "", append(endpointOf(proxyURL), "--upload", "async")...)
			replaced, renamed := []byte(`{"step": 2, "replaced": true}`), []byte(`{"step": 3}`)
			p.armFor("model.json")
			if err := os.WriteFile(filepath.Join(m.dir, "a.tmp"), replaced, 0o644); err != nil {
				t.Fatal(err)
			}
			// Renamed within the upload delay: it goes up as model.json;
			// strata sync starts it now (and waits for it: in the
			// background).
			if err := os.Rename(filepath.Join(m.dir, "a.tmp"), filepath.Join(m.dir, "model.json")); err != nil {
				t.Fatal(err)
			}
			synced := make(chan error, 1)
			go func() { synced <- exec.Command(binPath(t), "sync", m.dir).Run() }()
			p.waitSent(t)
			f, err := os.Create(filepath.Join(m.dir, "b.tmp"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(renamed); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil { // up whole: the rename copies it
				t.Fatal(err)
			}
			f.Close()
			if err := os.Rename(filepath.Join(m.dir, "b.tmp"), filepath.Join(m.dir, "model.json")); err != nil {
				t.Fatal(err)
			}
			p.waitDone(t)
			t.Logf("strata sync meanwhile: %v", <-synced)
			runSync(t, m)
			time.Sleep(time.Second) // a take-down would follow the late answer at once
			if got, _, err := bucketSHA(t, w, "model.json"); err != nil || got != sha(renamed) {
				t.Fatalf("model.json in the bucket: %v (the replaced file's bytes: %v)", err, got == sha(replaced))
			}
			gone(t, "a.tmp")
			gone(t, "b.tmp")
			if b, err := os.ReadFile(filepath.Join(m.dir, "model.json")); err != nil || !bytes.Equal(b, renamed) {
				t.Fatalf("model.json through the mount: %q, %v", b, err)
			}
		})
		// delete-answer-cut and -502: the bucket stores the upload, and
		// its answer never comes back (the connection cut, or a gateway's
		// 502). S3's one-request put then refused its retry after the
		// delete and said nothing had appeared, and GCS took a 502 for a
		// refusal: the deleted file stayed in the bucket for good (so did
		// a renamed file's old name, rename-answer-cut and -502).
		for _, lose := range []string{"", "cut", "502"} {
			t.Run(strings.TrimSuffix("delete-answer-"+lose, "-answer-"), func(t *testing.T) {
				p.armTo("", lose)
				if err := os.WriteFile(filepath.Join(m.dir, "scratch.bin"), data, 0o644); err != nil {
					t.Fatal(err)
				}
				p.waitSent(t)
				if err := os.Remove(filepath.Join(m.dir, "scratch.bin")); err != nil {
					t.Fatal(err)
				}
				p.waitDone(t)
				runSync(t, m)
				gone(t, "scratch.bin")
				if _, err := os.Stat(filepath.Join(m.dir, "scratch.bin")); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("scratch.bin through the mount: %v", err)
				}
			})
		}
		// rm -rf while an upload is in flight (a trainer removing an old
		// checkpoint): the file's object lands after its unlink returned,
		// and is taken down when the answer comes. Meanwhile its
		// directory lists nothing, and rmdir removes it and then its
		// parent, as on local disk. Before, rmdir listed the bucket, found
		// the object and said ENOTEMPTY, and a listing fetched then showed
		// the deleted file; then the parent's rmdir found the object's
		// prefix (checkpoint-1/sub/) and said ENOTEMPTY.
		t.Run("rmdir-answer-late", func(t *testing.T) {
			top := filepath.Join(m.dir, "checkpoint-1")
			dir := filepath.Join(top, "sub")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			p.armTo("", "late")
			if err := os.WriteFile(filepath.Join(dir, "model.bin"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			p.waitSent(t)
			if err := os.Remove(filepath.Join(dir, "model.bin")); err != nil {
				t.Fatal(err)
			}
			p.waitDone(t) // in the bucket now, its answer held 2 s more
			if _, err := os.Stat(filepath.Join(dir, "model.bin")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("stat of the deleted file while its late upload is in the bucket: %v", err)
			}
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
				t.Errorf("readdir of the emptied directory while the deleted file's late upload is in the bucket: %v, %v", ents, err)
			}
			if err := os.Remove(dir); err != nil {
				t.Errorf("rmdir of the emptied directory while the deleted file's late upload is in the bucket: %v", err)
			}
			if err := os.Remove(top); err != nil {
				t.Errorf("rmdir of its parent while the deleted file's late upload is in the bucket: %v", err)
			}
			runSync(t, m)
			gone(t, "checkpoint-1/sub/model.bin")
			gone(t, "checkpoint-1/sub/")
			gone(t, "checkpoint-1/")
			if _, err := os.Stat(top); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the removed directory through the mount: %v", err)
			}
		})
		// discard-answer-cut and -502: a rewrite discarded
		// (`strata uploads --discard`) while its upload is held, whose
		// answer is then lost. The bucket keeps what landed (it cannot
		// have the old object back) and the command says the discard came
		// too late. Before, it said the upload was discarded, and the
		// mount went on showing the old object the bucket no longer had.
		for _, lose := range []string{"cut", "502"} {
			t.Run("discard-answer-"+lose, func(t *testing.T) {
				old, data := []byte(`{"epoch": 1}`), []byte(`{"epoch": 2, "discarded": "too late"}`)
				put(t, w, map[string][]byte{"disc-" + lose + ".json": old})
				path := filepath.Join(m.dir, "disc-"+lose+".json")
				if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, old) {
					t.Fatalf("reading the object before the rewrite: %q, %v", got, err)
				}
				p.armTo("", lose)
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				p.waitSent(t)
				out, err := exec.Command(binPath(t), "uploads", "--discard", m.dir, "disc-"+lose+".json").CombinedOutput()
				p.waitDone(t)
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "discarded too late") {
					t.Errorf("--discard of an upload that landed, its answer lost: %v\n%s", err, out)
				}
				if h, _, err := bucketSHA(t, w, "disc-"+lose+".json"); err != nil || h != sha(data) {
					t.Errorf("the bucket after the discard: %v (what landed: %v)", err, h == sha(data))
				}
				if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
					t.Errorf("through the mount after the discard: %q, %v; want what the bucket holds", got, err)
				}
			})
		}
	})
}
