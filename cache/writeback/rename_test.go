package writeback

import (
	"context"
	"testing"
)

// TestRenameWhileWritingClearsTheLocalEntry: a file renamed while it is
// still being written, then committed and uploaded under its new name,
// leaves no local entry behind (its open write session moved with it:
// counting it against the new name forever kept the entry local).
func TestRenameWhileWritingClearsTheLocalEntry(t *testing.T) {
	e := newEnv(t, Sync, newBucket(), "")
	st, err := e.m.NewStaging("old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteAt([]byte("renamed while open"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rekey("old", "new", ""); err != nil {
		t.Fatal(err)
	}
	e.local.Store("new", true) // the filesystem shows it under its new name, local
	j, err := e.m.Commit(context.Background(), "new", st, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.bucket.get("new"); !ok {
		t.Fatal("not uploaded under the new name")
	}
	if _, local := e.local.Load("new"); local {
		t.Fatal("the uploaded file's entry is still local: its write session is counted under the new name forever")
	}
}
