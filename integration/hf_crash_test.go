package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// hfDriver is the Hugging Face Trainer's checkpoint pattern, as a trainer
// process runs it: several files into tmp-checkpoint-N/, the directory
// renamed to checkpoint-N, the checkpoint before last removed with
// shutil.rmtree. Each step is logged (fsync'd, on local disk) once it
// returned.
const hfDriver = `
import os, shutil, sys
root, log = sys.argv[1], sys.argv[2]
files = [("model.safetensors", 6 << 20), ("optimizer.pt", 3 << 20), ("trainer_state.json", 2000)]
lf = open(log, "a")
def done(what):
    lf.write(what + "\n"); lf.flush(); os.fsync(lf.fileno())
def content(n, name, size):
    seed = ("%d/%s\n" % (n, name)).encode()
    return (seed * (size // len(seed) + 1))[:size]
for n in range(1, 10000):
    tmp = os.path.join(root, "tmp-checkpoint-%d" % n)
    os.mkdir(tmp)
    done("mkdir %d" % n)
    for name, size in files:
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(content(n, name, size))
        done("wrote %d %s" % (n, name))
    os.rename(tmp, os.path.join(root, "checkpoint-%d" % n))
    done("renamed %d" % n)
    if n > 2:
        shutil.rmtree(os.path.join(root, "checkpoint-%d" % (n - 2)))
        done("deleted %d" % (n - 2))
`

var hfFiles = []string{"model.safetensors", "optimizer.pt", "trainer_state.json"}

// hfContent is what the driver writes to checkpoint n's file name.
func hfContent(n int, name string) []byte {
	size := map[string]int{"model.safetensors": 6 << 20, "optimizer.pt": 3 << 20, "trainer_state.json": 2000}[name]
	seed := []byte(fmt.Sprintf("%d/%s\n", n, name))
	return bytes.Repeat(seed, size/len(seed)+1)[:size]
}

// hfStep is one step of the driver, in order: mkdir, three writes,
// rename, then (from the third checkpoint on) the delete of n-2.
type hfStep struct {
	op   string // "mkdir", "wrote", "renamed", "deleted"
	n    int
	name string
}

func (s hfStep) String() string { return strings.TrimSpace(fmt.Sprintf("%s %d %s", s.op, s.n, s.name)) }

func hfSteps(upTo int) []hfStep {
	var out []hfStep
	for n := 1; n <= upTo; n++ {
		out = append(out, hfStep{op: "mkdir", n: n})
		for _, f := range hfFiles {
			out = append(out, hfStep{op: "wrote", n: n, name: f})
		}
		out = append(out, hfStep{op: "renamed", n: n})
		if n > 2 {
			out = append(out, hfStep{op: "deleted", n: n - 2})
		}
	}
	return out
}

// apply returns the bucket's keys after step s (a new set).
func (s hfStep) apply(keys map[string]bool) map[string]bool {
	out := map[string]bool{}
	tmp, final := fmt.Sprintf("tmp-checkpoint-%d/", s.n), fmt.Sprintf("checkpoint-%d/", s.n)
	for k := range keys {
		switch {
		case s.op == "renamed" && strings.HasPrefix(k, tmp):
			out[final+strings.TrimPrefix(k, tmp)] = true
		case s.op == "deleted" && strings.HasPrefix(k, final):
		default:
			out[k] = true
		}
	}
	switch s.op {
	case "mkdir":
		out[tmp] = true
	case "wrote":
		out[tmp+s.name] = true
	}
	return out
}

// TestHuggingFacePatternSurvivesKill9: the mount (--upload async) is
// killed with SIGKILL at random points of the Hugging Face checkpoint
// pattern; after a restart on the same cache dir and strata sync, the
// bucket holds exactly the objects of the steps that returned (the step
// cut short: all of it or none of it, an rmtree any part of it), every
// object whole.
func TestHuggingFacePatternSurvivesKill9(t *testing.T) {
	requireFUSE(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed to run the trainer's pattern")
	}
	srv := startMinIO(t)
	script := filepath.Join(t.TempDir(), "hf.py")
	if err := os.WriteFile(script, []byte(hfDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	points := 20
	if testing.Short() {
		points = 6
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := range points {
		delay := time.Duration(rng.IntN(3000)) * time.Millisecond
		t.Run(fmt.Sprintf("point%02d", i), func(t *testing.T) {
			hfKillAt(t, srv, script, delay)
		})
	}
}

func hfKillAt(t *testing.T, srv server, script string, delay time.Duration) {
	bucket := srv.newBucket(t)
	w := srv.writer(t, bucket)
	be := w.(backend.Backend)
	cacheDir := t.TempDir()
	m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async")
	logPath := filepath.Join(t.TempDir(), "steps.log")
	driver := exec.Command("python3", script, m.dir, logPath)
	var out bytes.Buffer
	driver.Stdout, driver.Stderr = &out, &out
	if err := driver.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- driver.Wait() }()
	// The delay counts from the first step that returned (the driver's
	// start-up is not part of the pattern).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(logPath); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the driver did not start its first step within 60 s")
		}
	}
	select {
	case err := <-exited:
		t.Fatalf("the driver stopped before the kill: %v\n%s", err, out.String())
	case <-time.After(delay):
	}
	if err := syscall.Kill(m.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, m.pid)
	m.pid = 0
	var driverErr error
	select {
	case driverErr = <-exited: // its syscall failed: the mount is gone
	case <-time.After(30 * time.Second):
		_ = driver.Process.Kill()
		driverErr = <-exited
	}
	t.Logf("the driver ended: %v", driverErr)
	if out, err := exec.Command("umount", "-l", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("umount -l %s: %v %s", m.dir, err, out)
	}
	logged, err := os.ReadFile(logPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	lines := strings.Fields(strings.ReplaceAll(string(logged), " ", "_"))
	steps := hfSteps(len(lines)/5 + 3)
	before := map[string]bool{}
	for i, l := range lines {
		if want := strings.ReplaceAll(steps[i].String(), " ", "_"); l != want {
			t.Fatalf("step %d logged %q, want %q", i, l, want)
		}
		before = steps[i].apply(before)
	}
	inFlight := steps[len(lines)]
	t.Logf("killed after %v: %d steps returned, %q cut short", delay, len(lines), inFlight)

	m2 := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", "async")
	runSync(t, m2)
	got := map[string]bool{}
	page, err := be.List(context.Background(), "", backend.ListOptions{Recursive: true})
	if err != nil || page.Next != "" {
		t.Fatalf("listing the bucket: %v (more pages: %v)", err, page.Next != "")
	}
	for _, o := range page.Objects {
		got[o.Key] = true
		dir, name, _ := strings.Cut(o.Key, "/")
		var n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(dir, "tmp-"), "checkpoint-%d", &n); err != nil {
			t.Errorf("unexpected object %q", o.Key)
			continue
		}
		if name == "" {
			continue // the directory's marker
		}
		h, size, err := bucketSHA(t, w, o.Key)
		if want := hfContent(n, name); err != nil || h != sha(want) {
			t.Errorf("%s is not whole: %d bytes (want %d), %v", o.Key, size, len(want), err)
		}
	}
	after := inFlight.apply(before)
	ok := sameKeys(got, before) || sameKeys(got, after)
	if inFlight.op == "deleted" { // rmtree removes one name at a time
		ok = subset(after, got) && subset(got, before)
	}
	if !ok {
		t.Fatalf("bucket after restart:\n  %q\nwant the state before %q:\n  %q\nor after it:\n  %q",
			sortedKeys(got), inFlight, sortedKeys(before), sortedKeys(after))
	}
}

func sameKeys(a, b map[string]bool) bool { return subset(a, b) && subset(b, a) }

func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
