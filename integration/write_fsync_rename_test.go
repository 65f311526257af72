package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fsyncRenameScript writes argv[2]'s bytes to OLD (argv[5]) under DIR
// (argv[1]) as Python's "wb" does, fsyncs it, renames it (or, with argv[6]
// set, its directory) to NEW (argv[6] or argv[5]) while it is still open,
// then, by argv[3]: closes it ("close"), writes argv[4]'s bytes and closes
// it ("more"), is killed ("kill"), or writes argv[4]'s bytes and is killed
// ("morekill").
const fsyncRenameScript = `
import os, sys, signal
d, then, old, new = sys.argv[1], sys.argv[3], sys.argv[5], sys.argv[6]
os.makedirs(os.path.dirname(os.path.join(d, old)), exist_ok=True)
f = open(os.path.join(d, old), 'wb')
f.write(open(sys.argv[2], 'rb').read()); f.flush(); os.fsync(f.fileno())
if os.path.dirname(old) != os.path.dirname(new):
    os.rename(os.path.join(d, os.path.dirname(old)), os.path.join(d, os.path.dirname(new)))
else:
    os.rename(os.path.join(d, old), os.path.join(d, new))
if then.startswith('more'):
    f.write(open(sys.argv[4], 'rb').read()); f.flush()
if then.endswith('kill'):
    os.kill(os.getpid(), signal.SIGKILL)
f.close()
`

// TestAFileFsyncedThenRenamedOpenIsInTheBucket: write, fsync, and rename
// while the file is still open (an atomic save that renames before it
// closes; tempfile.NamedTemporaryFile with os.replace inside its with
// block). The fsync put the file in the bucket, and the rename moves it
// there as it moves any uploaded file, so that the new name holds it,
// whatever the writer does next: a close with nothing new sends nothing
// more (one PUT in all), a write after the rename goes up at the close,
// and a writer killed after the rename leaves what its fsync published
// under the new name, as a killed writer leaves any file's previous
// object (README, write semantics: fsync, rename of a file, the writer is
// killed). So too when the file's directory is renamed (a checkpoint's
// tmp-checkpoint-1/ to checkpoint-1/). S3 and GCS. Before, with --upload async (the file written by passthrough),
// the rename deleted the old name's object and left the new name to the
// close: a second upload of every byte, and a killed writer's file was
// kept aside and reported failed, in neither name of the bucket.
func TestAFileFsyncedThenRenamedOpenIsInTheBucket(t *testing.T) {
	requireFUSE(t)
	t.Parallel()
	servers(t, func(t *testing.T, srv server) { testFsyncedThenRenamedOpen(t, srv) })
}

func testFsyncedThenRenamedOpen(t *testing.T, srv server) {
	for _, mode := range []string{"async", "sync"} {
		for _, tc := range []struct{ then, old, new string }{
			{"close", "tmp.bin", "final.bin"}, {"more", "tmp.bin", "final.bin"},
			{"kill", "tmp.bin", "final.bin"}, {"morekill", "tmp.bin", "final.bin"},
			{"close", "tmp-checkpoint-1/model.bin", "checkpoint-1/model.bin"},
			{"kill", "tmp-checkpoint-1/model.bin", "checkpoint-1/model.bin"},
		} {
			then, old, new := tc.then, tc.old, tc.new
			name := mode + "/" + then
			if strings.Contains(old, "/") {
				name += "/dir"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				bucket := srv.newBucket(t)
				w := srv.writer(t, bucket)
				addr := metricsAddr(t)
				cacheDir := t.TempDir()
				m := startMount(t, srv, srv.source(bucket, ""), cacheDir, "--upload", mode, "--metrics-addr", addr)
				data, more := randData(91, 3<<20), randData(92, 1<<20)
				src, moreSrc := filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "more")
				if err := os.WriteFile(src, data, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(moreSrc, more, 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command("python3", "-c", fsyncRenameScript, m.dir, src, then, moreSrc, old, new).CombinedOutput()
				killed := strings.HasSuffix(then, "kill")
				if (err != nil) != killed {
					t.Fatalf("the writer: %v\n%s", err, out)
				}
				want := data // a killed writer publishes nothing after its fsync
				if then == "more" {
					want = append(append([]byte{}, data...), more...)
				}
				sout, serr, err := runStrata(t, srv, "sync", m.dir)
				if wantFail := then == "morekill"; (err != nil) != wantFail {
					t.Errorf("strata sync: %v (want a failure reported: %v)\n%s%s", err, wantFail, sout, serr)
				}
				if got, n, err := bucketSHA(t, w, new); err != nil || got != sha(want) {
					t.Errorf("the bucket's %s: %d bytes, equal %v, %v; want the %d bytes fsync'd and written before the close or kill", new, n, got == sha(want), err, len(want))
				}
				if _, n, err := bucketSHA(t, w, old); err == nil {
					t.Errorf("the bucket still holds %s (%d bytes) after its rename", old, n)
				}
				if got, err := os.ReadFile(filepath.Join(m.dir, new)); err != nil || sha(got) != sha(want) {
					t.Errorf("the mount's %s: %d bytes, equal %v, %v", new, len(got), sha(got) == sha(want), err)
				}
				if _, err := os.Stat(filepath.Join(m.dir, old)); !os.IsNotExist(err) {
					t.Errorf("the mount's %s after its rename: %v", old, err)
				}
				wantKept := 0
				if then == "morekill" {
					wantKept = 1 // what the killed writer wrote after its fsync
				}
				if got := keptCopies(t, cacheDir); got != wantKept {
					t.Errorf("%d copies kept under failed-writes/, want %d", got, wantKept)
				}
				puts := metric(scrape(t, addr), "strata_backend_requests_total", map[string]string{"op": "put", "status": "ok"})
				wantPuts := map[string]float64{"close": 1, "more": 2, "kill": 1, "morekill": 1}[then]
				if strings.Contains(old, "/") {
					wantPuts++ // mkdir's directory marker
				}
				if puts != wantPuts {
					t.Errorf("%v PUTs; want %v (the fsync's%s, and a mkdir's marker where there is one)", puts, wantPuts, map[bool]string{true: " and the close's", false: ""}[then == "more"])
				}
			})
		}
	}
}
