package writeback

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// partsBucket is a fakeBucket that also takes uploads in parts, and
// records what was sent when.
type partsBucket struct {
	*fakeBucket
	mu       sync.Mutex
	begun    int
	sent     int // parts sent
	aborted  int
	uploads  map[*fakeParts]bool
	failPart error // SendPart fails with it when set
	// abortGate, if set, holds AbortParts until it is closed or the
	// caller gives up (an endpoint gone silent).
	abortGate chan struct{}
	// sendGate, if set, holds SendPart of part sendGateFrom or later,
	// before it reads the part, until it is closed; sendsHeld counts
	// the sends it has held.
	sendGate     chan struct{}
	sendGateFrom int
	sendsHeld    atomic.Int32
}

func newPartsBucket() *partsBucket {
	return &partsBucket{fakeBucket: newBucket(), uploads: map[*fakeParts]bool{}}
}

type fakeParts struct {
	b     *partsBucket
	key   string
	id    string
	parts map[int][]byte
}

func (b *partsBucket) BeginParts(ctx context.Context, key string) (backend.PartUpload, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.begun++
	u := &fakeParts{b: b, key: key, id: fmt.Sprint(b.begun), parts: map[int][]byte{}}
	b.uploads[u] = true
	return u, nil
}

func (b *partsBucket) counts() (begun, sent, aborted, open int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.begun, b.sent, b.aborted, len(b.uploads)
}

func (u *fakeParts) SendPart(ctx context.Context, number int, r io.ReaderAt, off, n int64) (string, error) {
	if u.b.sendGate != nil && number >= u.b.sendGateFrom {
		u.b.sendsHeld.Add(1)
		<-u.b.sendGate
	}
	u.b.mu.Lock()
	ferr := u.b.failPart
	u.b.mu.Unlock()
	if ferr != nil {
		return "", ferr
	}
	d := make([]byte, n)
	if _, err := r.ReadAt(d, off); err != nil {
		return "", err
	}
	sum := md5.Sum(d)
	u.b.mu.Lock()
	defer u.b.mu.Unlock()
	u.parts[number] = d
	u.b.sent++
	return hex.EncodeToString(sum[:]), nil
}

func (u *fakeParts) Complete(ctx context.Context, tags []string, size int64, opt backend.CompleteOptions) (backend.ObjectInfo, error) {
	u.b.mu.Lock()
	var all []byte
	for i, tag := range tags {
		d := u.parts[i+1]
		sum := md5.Sum(d)
		if hex.EncodeToString(sum[:]) != tag {
			u.b.mu.Unlock()
			return backend.ObjectInfo{}, fmt.Errorf("part %d: tag %s is not the part sent last", i+1, tag)
		}
		all = append(all, d...)
	}
	delete(u.b.uploads, u)
	u.b.mu.Unlock()
	if int64(len(all)) != size {
		return backend.ObjectInfo{}, fmt.Errorf("parts hold %d bytes, want %d", len(all), size)
	}
	return u.b.fakeBucket.Put(ctx, u.key, bytes.NewReader(all), size, backend.PutOptions{IfVersion: opt.IfVersion, Stop: opt.Stop})
}

func (u *fakeParts) ID() string { return u.id }

func (b *partsBucket) AbortParts(ctx context.Context, key, id string) error {
	if b.abortGate != nil {
		select {
		case <-b.abortGate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for u := range b.uploads {
		if u.key == key && u.id == id {
			delete(b.uploads, u)
			b.aborted++
		}
	}
	return nil
}

func (u *fakeParts) Abort(ctx context.Context) {
	u.b.mu.Lock()
	defer u.b.mu.Unlock()
	if u.b.uploads[u] {
		delete(u.b.uploads, u)
		u.b.aborted++
	}
}

// smallParts makes the eager uploads of a test use 1 MiB parts.
func smallParts(t *testing.T) {
	ps, start := eagerPartSize, eagerStart
	eagerPartSize, eagerStart = 1<<20, 2<<20
	t.Cleanup(func() { eagerPartSize, eagerStart = ps, start })
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeSeq writes data in 256 KiB writes from off.
func writeSeq(t *testing.T, st *Staging, data []byte, off int64) {
	t.Helper()
	for i := 0; i < len(data); i += 256 << 10 {
		if _, err := st.WriteAt(data[i:min(i+256<<10, len(data))], off+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEagerUploadOverlapsTheWrites: in sync mode a large file's parts go
// up while it is written; the commit sends the rest, and the object is
// exactly the committed bytes, however the writer went back over parts
// already sent or truncated the file.
func TestEagerUploadOverlapsTheWrites(t *testing.T) {
	smallParts(t)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		eager bool                                   // parts go up before the commit
		write func(t *testing.T, st *Staging) []byte // returns the file's final bytes
	}{
		{"sequential", true, func(t *testing.T, st *Staging) []byte {
			d := random(5*eagerPartSize + 12345)
			writeSeq(t, st, d, 0)
			return d
		}},
		{"rewrites a sent part", true, func(t *testing.T, st *Staging) []byte {
			d := random(4*eagerPartSize + 7)
			writeSeq(t, st, d, 0)
			// The first parts are sent by now; write over one of them, as
			// a zip writer going back to fix a header.
			waitFor(t, "parts sent", func() bool { _, s, _, _ := st.m.pw.(*partsBucket).counts(); return s >= 2 })
			patch := random(100)
			copy(d[eagerPartSize+10:], patch)
			if _, err := st.WriteAt(patch, eagerPartSize+10); err != nil {
				t.Fatal(err)
			}
			return d
		}},
		{"truncated shorter", true, func(t *testing.T, st *Staging) []byte {
			d := random(5 * eagerPartSize)
			writeSeq(t, st, d, 0)
			waitFor(t, "parts sent", func() bool { _, s, _, _ := st.m.pw.(*partsBucket).counts(); return s >= 3 })
			n := int64(2*eagerPartSize + 99)
			if err := st.Truncate(n); err != nil {
				t.Fatal(err)
			}
			return d[:n]
		}},
		// Written from the second part on, then the first: nothing is
		// sent before the writer has written the file in order; the
		// commit sends it whole.
		{"out of order", false, func(t *testing.T, st *Staging) []byte {
			d := random(3*eagerPartSize + 5)
			writeSeq(t, st, d[eagerPartSize:], eagerPartSize)
			writeSeq(t, st, d[:eagerPartSize], 0)
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPartsBucket()
			e := newEnv(t, Sync, b.fakeBucket, "")
			e.m.pw = b // the fake's Put stays the plain path
			st, err := e.m.NewStaging("ckpt/model.pt")
			if err != nil {
				t.Fatal(err)
			}
			want := tc.write(t, st)
			if _, err := e.m.Commit(context.Background(), "ckpt/model.pt", st, backend.VersionAbsent, 1); err != nil {
				t.Fatal(err)
			}
			got, ok := b.get("ckpt/model.pt")
			if !ok || !bytes.Equal(got, want) {
				t.Fatalf("the bucket holds %d bytes (present %v), want the %d committed", len(got), ok, len(want))
			}
			begun, sent, _, open := b.counts()
			if tc.eager && (begun != 1 || sent < len(want)/int(eagerPartSize)) || open != 0 {
				t.Errorf("begun %d uploads, sent %d parts, %d left open; want 1, at least %d, 0", begun, sent, open, len(want)/int(eagerPartSize))
			}
			if n := b.puts.Load(); n != 1 { // Complete's own Put in the fake
				t.Errorf("%d whole-file puts besides the parts", n-1)
			}
		})
	}
}

// TestEagerUploadBeforeTheCommit: the parts go up while the file is
// written, before any commit, and nothing is visible until the commit.
func TestEagerUploadBeforeTheCommit(t *testing.T) {
	smallParts(t)
	b := newPartsBucket()
	e := newEnv(t, Sync, b.fakeBucket, "")
	e.m.pw = b
	st, err := e.m.NewStaging("ckpt/model.pt")
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, st, bytes.Repeat([]byte{7}, int(4*eagerPartSize)), 0)
	waitFor(t, "parts sent before the commit", func() bool { _, s, _, _ := b.counts(); return s >= 3 })
	if _, ok := b.get("ckpt/model.pt"); ok {
		t.Fatal("an object appeared before the commit")
	}
	// A file never committed (a failed write, a killed writer) leaves
	// nothing: its upload is aborted.
	st.Discard()
	waitFor(t, "the upload aborted", func() bool { _, _, a, o := b.counts(); return a == 1 && o == 0 })
	if len(b.keys()) != 0 {
		t.Fatalf("the bucket holds %v after a discarded write", b.keys())
	}
}

// TestEagerUploadFailureFallsBack: a part that fails gives the eager
// upload up; the commit uploads the file whole, and nothing is left open.
// Small files never start one.
func TestEagerUploadFailureFallsBack(t *testing.T) {
	smallParts(t)
	b := newPartsBucket()
	b.failPart = errors.New("injected part failure")
	e := newEnv(t, Sync, b.fakeBucket, "")
	e.m.pw = b
	st, err := e.m.NewStaging("a")
	if err != nil {
		t.Fatal(err)
	}
	d := bytes.Repeat([]byte{1, 2, 3}, int(eagerPartSize)+5)
	writeSeq(t, st, d, 0)
	if _, err := e.m.Commit(context.Background(), "a", st, backend.VersionAbsent, 1); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.get("a"); !ok || !bytes.Equal(got, d) {
		t.Fatal("the file did not go up whole after its parts failed")
	}
	waitFor(t, "the failed upload aborted", func() bool { _, _, a, o := b.counts(); return a == 1 && o == 0 })

	small, err := e.m.NewStaging("small")
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, small, make([]byte, eagerStart-1), 0)
	if _, err := e.m.Commit(context.Background(), "small", small, backend.VersionAbsent, 1); err != nil {
		t.Fatal(err)
	}
	if begun, _, _, _ := b.counts(); begun != 1 {
		t.Errorf("a file under %d bytes began an upload in parts", eagerStart)
	}
}

// TestEagerUploadFallsBackWithoutWaitingForItsAbort: the parts failed
// and the endpoint has gone silent, so the abort of the multipart upload
// hangs (up to its minute). The commit's whole upload must not wait for
// it: CI saw a close with --upload sync return EIO after 82 s instead of
// about a minute (TestUploadToASilentEndpoint, in parts), 60 s of it the
// abort of the parts before the fallback began.
func TestEagerUploadFallsBackWithoutWaitingForItsAbort(t *testing.T) {
	smallParts(t)
	b := newPartsBucket()
	b.failPart = errors.New("injected part failure")
	b.abortGate = make(chan struct{})
	release := sync.OnceFunc(func() { close(b.abortGate) })
	defer release()
	e := newEnv(t, Sync, b.fakeBucket, "")
	e.m.pw = b
	st, err := e.m.NewStaging("a")
	if err != nil {
		t.Fatal(err)
	}
	d := bytes.Repeat([]byte{4, 5, 6}, int(eagerPartSize)+5)
	writeSeq(t, st, d, 0)
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Commit(context.Background(), "a", st, backend.VersionAbsent, 1)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the commit waited for the abort of the failed parts before uploading the file whole")
	}
	if got, ok := b.get("a"); !ok || !bytes.Equal(got, d) {
		t.Fatal("the file did not go up whole after its parts failed")
	}
	release()
	waitFor(t, "the failed upload aborted", func() bool { _, _, a, o := b.counts(); return a == 1 && o == 0 })
}

// TestEagerUploadFarWrite: a write far past the end (a sparse file of
// a petabyte) gives the eager upload up instead of tracking its parts.
func TestEagerUploadFarWrite(t *testing.T) {
	e := newEager(context.Background(), newPartsBucket(), "k", os.Stdin, 0, 1)
	e.wrote(1<<50, 1<<50+1)
	if len(e.gen) != 0 || !errors.Is(e.failed, errNoEager) {
		t.Fatalf("after a write at 1 PiB: %d parts tracked, failed %v", len(e.gen), e.failed)
	}
	e.abort()
}

// TestEagerUploadAbortedAtClose: a file still being written when the
// mount stops leaves no incomplete upload behind.
func TestEagerUploadAbortedAtClose(t *testing.T) {
	smallParts(t)
	b := newPartsBucket()
	e := newEnv(t, Sync, b.fakeBucket, "")
	e.m.pw = b
	st, err := e.m.NewStaging("open.pt")
	if err != nil {
		t.Fatal(err)
	}
	writeSeq(t, st, make([]byte, 4*eagerPartSize), 0)
	waitFor(t, "parts sent", func() bool { _, s, _, _ := b.counts(); return s >= 1 })
	e.close()
	if begun, _, aborted, open := b.counts(); begun != 1 || aborted != 1 || open != 0 {
		t.Fatalf("after Close: %d begun, %d aborted, %d open; want 1, 1, 0", begun, aborted, open)
	}
}
