package integration

import (
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/testserver"
)

// torchSaveLoad saves a state dict with torch.save into the mount, loads
// it back with torch.load through the mount, and prints the sha256 of the
// file as written. A mismatch between saved and loaded tensors exits 1.
const torchSaveLoad = `
import hashlib, sys, torch
path, mb = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(42)
state = {"layer%d.weight" % i: torch.randn(mb * 1024 * 1024 // 4 // 8, generator=g) for i in range(8)}
state["step"] = torch.tensor(1000)
torch.save(state, path)
back = torch.load(path)
if state.keys() != back.keys() or not all(torch.equal(state[k], back[k]) for k in state):
    sys.exit("loaded tensors differ from the saved ones")
h = hashlib.sha256()
with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
print(h.hexdigest())
`

// TestTorchSaveLoad: a checkpoint written by torch.save into the mount
// (both upload modes) loads back equal with torch.load, and the bucket
// holds exactly the bytes torch wrote.
func TestTorchSaveLoad(t *testing.T) {
	requireFUSE(t)
	// Debian's interpreter, where python3-torch installs (a python3
	// earlier on PATH, pyenv's, does not see it), as the bench uses.
	python := cmp.Or(os.Getenv("STRATA_BENCH_PYTHON"), "/usr/bin/python3")
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		testserver.SkipOrFail(t, "%s with torch (python3-torch, installed by make bench-tools): %v", python, err)
	}
	script := filepath.Join(t.TempDir(), "save_load.py")
	if err := os.WriteFile(script, []byte(torchSaveLoad), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	size := "256"
	if testing.Short() {
		size = "32"
	}
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			out, err := exec.Command(python, script, filepath.Join(m.dir, "model-"+mode+".pt"), size).CombinedOutput()
			if err != nil {
				t.Fatalf("torch.save/torch.load through the mount: %v\n%s", err, out)
			}
			fields := strings.Fields(string(out))
			if len(fields) == 0 {
				t.Fatalf("no digest printed:\n%s", out)
			}
			runSync(t, m)
			got, n, err := bucketSHA(t, w, "model-"+mode+".pt")
			if err != nil || got != fields[len(fields)-1] {
				t.Fatalf("bucket object (%d bytes) differs from the file torch wrote: %v", n, err)
			}
		})
	}
}
