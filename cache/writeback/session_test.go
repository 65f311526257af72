package writeback

import (
	"context"
	"errors"
	"testing"

	"github.com/stratafs/strata/cache/meta"
)

// TestSessionOwnsDirtyAndFailure: a write session knows itself whether it
// holds new content and whether a write of it failed, and the manager
// never takes a failed one for upload, whoever asks.
func TestSessionOwnsDirtyAndFailure(t *testing.T) {
	b := newBucket()
	e := newEnv(t, Sync, b, t.TempDir())
	ctx := context.Background()

	st, err := e.m.NewStaging("copy")
	if err != nil {
		t.Fatal(err)
	}
	if st.Dirty() || st.Failed() != nil {
		t.Fatalf("a new session: dirty %v, failed %v", st.Dirty(), st.Failed())
	}
	if _, err := st.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	if !st.Dirty() {
		t.Fatal("a written session is not dirty")
	}
	st.Discard()

	// A copy of the file's content is not new data; a truncation is.
	src := e.stage(t, []byte("previous"))
	cp, err := e.m.NewStagingCopy("copy", src.f, src.Size())
	src.Discard()
	if err != nil {
		t.Fatal(err)
	}
	if cp.Dirty() {
		t.Fatal("a copy of the previous content counts as new data")
	}
	if err := cp.Truncate(3); err != nil || !cp.Dirty() {
		t.Fatalf("truncated: %v, dirty %v", err, cp.Dirty())
	}
	cp.Discard()

	// The first failure is the one kept; the session is refused.
	bad, _ := e.m.NewStaging("bad")
	if _, err := bad.WriteAt([]byte("half"), 0); err != nil {
		t.Fatal(err)
	}
	first, second := errors.New("killed"), errors.New("later")
	bad.Fail(first)
	bad.Fail(second)
	if !errors.Is(bad.Failed(), first) {
		t.Fatalf("failed = %v, want the first failure", bad.Failed())
	}
	if _, err := e.m.Commit(ctx, "bad", bad, "", 0); !errors.Is(err, ErrFailedSession) || !errors.Is(err, first) {
		t.Fatalf("commit of a failed session: %v", err)
	}
	if _, ok := b.get("bad"); ok || b.puts.Load() != 0 {
		t.Fatal("a failed session was uploaded")
	}
	if e.m.Pending("bad") {
		t.Fatal("a failed session is pending upload")
	}
	e.m.Keep("bad", bad, bad.Failed()) // still the writer's: kept aside whole
	if s := e.m.Summary(); len(s.Failed) != 1 || s.Failed[0].Key != "bad" {
		t.Fatalf("summary %+v", s)
	}
}

// TestSessionKnowsItsWriters: a session knows who wrote to it, and a new
// session (after a commit) starts with no writer, so that a close by a
// process that wrote only to an earlier one publishes nothing.
func TestSessionKnowsItsWriters(t *testing.T) {
	e := newEnv(t, Async, newBucket(), t.TempDir())
	st, _ := e.m.NewStaging("k")
	const parent, child = 100, 101
	st.NoteWriter(parent)
	if !st.WrittenBy(parent) || st.WrittenBy(child) {
		t.Fatalf("writers: parent %v, child %v", st.WrittenBy(parent), st.WrittenBy(child))
	}
	if _, err := e.m.Commit(context.Background(), "k", st, "", 0); err != nil {
		t.Fatal(err)
	}
	next, _ := e.m.NewStaging("k")
	defer next.Discard()
	if next.WrittenBy(parent) {
		t.Fatal("a new session counts the previous session's writer")
	}
}

// TestSessionKnowsWhatItStartedFrom: what a file was before its write
// session is the session's record, handed to the upload job at commit,
// so that a session that fails after a close committed it (a passthrough
// write) still knows where the file goes back to; a session told nothing
// creates the file.
func TestSessionKnowsWhatItStartedFrom(t *testing.T) {
	e := newEnv(t, Async, newBucket(), t.TempDir())
	before := meta.Entry{Name: "k", Size: 8, MTime: 42, Version: "v1"}
	st, _ := e.m.NewStaging("k")
	st.StartFrom(before)
	if got := st.Previous(); got != before {
		t.Fatalf("previous = %+v, want %+v", got, before)
	}
	j, err := e.m.Register("k", st, "v1", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Previous(); got != before {
		t.Fatalf("job's previous = %+v, want %+v", got, before)
	}
	created, _ := e.m.NewStaging("new")
	defer created.Discard()
	if got := created.Previous(); got != (meta.Entry{}) {
		t.Fatalf("a creating session's previous = %+v, want none", got)
	}
}
