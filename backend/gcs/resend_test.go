package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// isFinalChunk matches the request that finalizes a resumable session:
// its Content-Range names the total size ("bytes a-b/total", not "/*").
func isFinalChunk(r *http.Request) bool {
	cr := r.Header.Get("Content-Range")
	return isChunk(r) && cr != "" && !strings.HasSuffix(cr, "/*")
}

// forward sends a request whose body was already read to fake-gcs-server,
// detached from the client's (gone) connection, and drains the answer.
func (p *faultProxy) forward(r *http.Request, body []byte) (int, error) {
	out := r.Clone(context.Background())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	resp, err := p.fetch(out)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // only the status matters
	return resp.StatusCode, nil
}

// lateFinalChunk is the pattern seen on a loaded CI machine: the final
// chunk's response is late (the emulator assembles the object), the
// client times out and re-sends it, the re-send is answered first
// (resend: 404 as fake-gcs-server does for a finalized session, or
// forwarded to the server as it is), and the first attempt lands
// (lands: creates the object, before or after the re-send's answer) or
// never does. landed receives the first attempt's upstream status.
func lateFinalChunk(p *faultProxy, resend int, landsFirst, lands bool, landed chan<- int) func(http.ResponseWriter, *http.Request) bool {
	var n atomic.Int64
	answered := make(chan struct{})
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !isFinalChunk(r) {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		if n.Add(1) == 1 {
			code := 0
			if lands && landsFirst {
				code, _ = p.forward(r, body)
			}
			<-r.Context().Done() // no answer: the client times out and re-sends
			if lands && !landsFirst {
				<-answered
				code, _ = p.forward(r, body)
			}
			landed <- code
			return true
		}
		defer once.Do(func() { close(answered) })
		if resend == 0 { // the server answers the re-send itself
			out := r.Clone(context.Background())
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.ContentLength = int64(len(body))
			resp, err := p.fetch(out)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return true
			}
			defer resp.Body.Close()
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body) // a cut copy is the client's error to see
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resend)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":"injected %s"}}`, resend, http.StatusText(resend))
		return true
	}
}

// A resumable upload survives a re-sent final chunk: whichever answer the
// re-send gets, Put reports the object the first attempt created, and
// its bytes are the data.
func TestFinalChunkResent(t *testing.T) {
	p, _, direct := faultSetup(t)
	b := newTestBackend(t, p.URL, "bkt", func(o *Options) {
		fastRetries(o)
		o.RequestTimeout = 300 * time.Millisecond
	})
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		resend     int
		landsFirst bool
		ifVersion  string
	}{
		{"ResentGets404ThenFirstLands", http.StatusNotFound, false, ""},
		{"ResentGets410ThenFirstLands", http.StatusGone, false, ""},
		{"FirstLandsResentToServer", 0, true, ""},
		{"CreateOnlyFirstLandsResentToServer", 0, true, backend.VersionAbsent},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "resent-" + c.name
			data := testData(3*chunkQuantum+5, 4)
			landed := make(chan int, 1)
			p.set(lateFinalChunk(p, c.resend, c.landsFirst, true, landed))
			defer p.set(nil)
			got, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), backend.PutOptions{PartSize: chunkQuantum, IfVersion: c.ifVersion})
			if len(landed) == 0 && p.hits.Load() == 0 {
				t.Fatalf("no final chunk was held (Put: %v)", err)
			}
			if code := <-landed; code != http.StatusOK {
				t.Fatalf("the first final chunk reached the server with status %d, want 200", code)
			}
			if err != nil {
				t.Fatalf("Put whose first final chunk landed: %v", err)
			}
			st, err := direct.Stat(ctx, key)
			if err != nil || st.Version != got.Version || st.Size != int64(len(data)) {
				t.Fatalf("object %+v, %v; Put returned %+v", st, err, got)
			}
			if b, err := readAll(ctx, direct, key, st.Version, 0, st.Size); err != nil || !bytes.Equal(b, data) {
				t.Fatalf("object bytes: %d, %v; want the data", len(b), err)
			}
		})
	}
}

// When the first attempt never lands, the re-send's failure stands and
// no object appears; another writer's object appearing meanwhile is not
// taken for the upload.
func TestFinalChunkResentNotLanded(t *testing.T) {
	p, _, direct := faultSetup(t)
	b := newTestBackend(t, p.URL, "bkt", func(o *Options) {
		fastRetries(o)
		o.RequestTimeout = 300 * time.Millisecond
	})
	ctx := context.Background()
	data := testData(3*chunkQuantum+5, 5)
	landed := make(chan int, 1)
	p.set(lateFinalChunk(p, http.StatusNotFound, false, false, landed))
	_, err := b.Put(ctx, "lost", bytes.NewReader(data), int64(len(data)), backend.PutOptions{PartSize: chunkQuantum})
	if len(landed) == 0 && p.hits.Load() == 0 {
		t.Fatalf("no final chunk was held (Put: %v)", err)
	}
	<-landed
	if err == nil {
		t.Fatal("Put whose final chunk never landed succeeded")
	}
	if _, err := direct.Stat(ctx, "lost"); !errors.Is(err, backend.ErrNotExist) {
		t.Fatalf("after the failed Put: %v, want ErrNotExist", err)
	}

	// Another writer's object (other bytes, same size) is not this upload.
	p.set(func(w http.ResponseWriter, r *http.Request) bool {
		if !isFinalChunk(r) {
			return false
		}
		_, _ = io.Copy(io.Discard, r.Body) // the re-send is refused whatever it held
		mustPut(t, direct, "other", testData(len(data), 6), backend.PutOptions{})
		w.WriteHeader(http.StatusNotFound)
		return true
	})
	_, err = b.Put(ctx, "other", bytes.NewReader(data), int64(len(data)), backend.PutOptions{PartSize: chunkQuantum})
	if err == nil {
		t.Fatal("Put took another writer's object for its own")
	}
}
