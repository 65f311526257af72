package workload

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCheckpointer runs python/checkpoint.py on local disk: torch.save and
// torch.load (a load with another seed must report unequal tensors), and
// three Hugging Face steps with two kept (the third removes
// checkpoint-1, nothing of tmp-checkpoint-N stays).
func TestCheckpointer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python with PyTorch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := StartCheckpointer(ctx)
	needTorch(t, err)
	defer c.Close()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.pt")
	const size = 3<<20 + 12345
	s, err := c.Save(ctx, p, size, 7, true)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != s.Bytes || s.Bytes < size || s.Close <= 0 {
		t.Fatalf("save %+v, file %v %v", s, fi, err)
	}
	l, err := c.Load(ctx, p, size, 7)
	if err != nil || l.Bytes != s.Bytes || len(l.SHA256) != 64 {
		t.Fatalf("load %+v: %v", l, err)
	}
	if _, err := c.Load(ctx, p, size, 8); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Errorf("load with another seed: %v, want tensors that differ", err)
	}
	root := filepath.Join(dir, "hf")
	var r HFResult
	for step := 1; step <= 3; step++ {
		if r, err = c.HF(ctx, root, step, size, 1, false, 2); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"model.safetensors", "optimizer.pt", "rng_state.pth", "scheduler.pt", "trainer_state.json"}
	names := make([]string, 0, len(r.Files))
	for n := range r.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) || r.Bytes() < size || r.Files["model.safetensors"] < size/3 {
		t.Errorf("files %v (%d bytes), want %v of at least %d", r.Files, r.Bytes(), want, size)
	}
	if !slices.Equal(r.Removed, []string{"checkpoint-1"}) || !slices.Equal(r.Checkpoints, []string{"checkpoint-2", "checkpoint-3"}) {
		t.Errorf("removed %v, left %v", r.Removed, r.Checkpoints)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, []string{"checkpoint-2", "checkpoint-3"}) {
		t.Errorf("directory holds %v", got)
	}
}

func TestObjectsDiffer(t *testing.T) {
	want := map[string]int64{"p/ck-2/a": 3, "p/ck-3/a": 4}
	for _, tc := range []struct {
		got map[string]int64
		ok  bool
	}{
		{map[string]int64{"p/ck-2/a": 3, "p/ck-3/a": 4}, true},
		{map[string]int64{"p/ck-2/a": 3, "p/ck-3/a": 4, "p/ck-3/": 0, "p/": 0}, true},
		{map[string]int64{"p/ck-2/a": 3, "p/ck-3/a": 2}, false},                   // torn
		{map[string]int64{"p/ck-2/a": 3}, false},                                  // missing
		{map[string]int64{"p/ck-2/a": 3, "p/ck-3/a": 4, "p/ck-1/a": 3}, false},    // not removed
		{map[string]int64{"p/ck-2/a": 3, "p/ck-3/a": 4, "p/tmp-ck-3/": 0}, false}, // stale marker
	} {
		if err := objectsDiffer(tc.got, want); (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok=%v", tc.got, err, tc.ok)
		}
	}
}
