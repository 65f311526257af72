package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// capSysAdmin is bit 21 of the capability sets in /proc/PID/status.
const capSysAdmin = 21

// TestCSISidecarPassthroughWithoutCapSysAdmin: a sidecar without
// CAP_SYS_ADMIN (as in a pod's default securityContext) cannot register
// backing files itself; the plugin registers its cache files for it, so
// warm opens in sidecar mode go through passthrough and the daemon
// answers no READ for them. When the sidecar dies, the plugin lets go of
// the FUSE connection, so the target fails fast (ENOTCONN) rather than
// hanging.
func TestCSISidecarPassthroughWithoutCapSysAdmin(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "sidecar")
	p := startCSI(t)
	target, handoff := podTarget(t, t.TempDir(), "5e7b", "data")
	if err := p.publish(publishReq("vol-pt", target, vol.attrs, vol.secrets)); err != nil {
		t.Fatal(err)
	}
	cacheRoot := t.TempDir()
	sc := startSidecarVia(t, handoff, cacheRoot, "setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--")
	csiWaitFile(t, filepath.Join(handoff, "data", "ready"), 60*time.Second, sc.logTail)
	if eff := capabilities(t, sc.cmd.Process.Pid); eff&(1<<capSysAdmin) != 0 {
		t.Fatalf("the sidecar has CAP_SYS_ADMIN (CapEff %x): the test would prove nothing", eff)
	}

	if d := diffTrees(vol.want, tree(t, target)); d != "" { // cold: fills the cache
		t.Fatalf("cold reads differ:\n%s", d)
	}
	before := sidecarStats(t, filepath.Join(cacheRoot, "data"))
	if !before.Session.Passthrough {
		t.Fatalf("passthrough is off in the sidecar without CAP_SYS_ADMIN; log:\n%s", sc.logTail())
	}
	dropCaches(t)
	if d := diffTrees(vol.want, tree(t, target)); d != "" { // warm
		t.Fatalf("warm reads differ:\n%s", d)
	}
	after := sidecarStats(t, filepath.Join(cacheRoot, "data"))
	files := int64(len(vol.want))
	if pt := after.Session.PTOpens - before.Session.PTOpens; pt != files {
		t.Errorf("warm opens through passthrough: %d, want %d (every file is cached)", pt, files)
	}
	if us, r := after.Session.USOpens-before.Session.USOpens, after.Session.Reads-before.Session.Reads; us != 0 || r != 0 {
		t.Errorf("warm epoch: %d userspace opens and %d READs answered by the sidecar, want 0 and 0", us, r)
	}

	// The sidecar dies: the target must fail, not hang.
	if err := sc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-sc.exited
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(filepath.Join(target, "labels.csv"))
		done <- err
	}()
	select {
	case err := <-done:
		// A request queued while the connection was being torn down is
		// aborted (ECONNABORTED); once it is down, ENOTCONN.
		if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
			t.Fatalf("read after the sidecar died: %v, want ENOTCONN or ECONNABORTED", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a read of the target hangs 20s after the sidecar died (the plugin still holds the FUSE connection)")
	}
	if _, err := os.ReadFile(filepath.Join(target, "labels.csv")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("read once the connection is down: %v, want ENOTCONN", err)
	}
	if err := p.unpublish("vol-pt", target); err != nil {
		t.Fatalf("NodeUnpublishVolume after the sidecar died: %v", err)
	}
}

// capabilities returns the effective capability set of pid.
func capabilities(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no CapEff in /proc/PID/status")
	return 0
}

// sidecarStats is `strata cache stats --json` of the sidecar's live mount.
func sidecarStats(t *testing.T, cacheDir string) liveCounters {
	t.Helper()
	out, err := exec.Command(testserver.Binary(t, "strata"), "cache", "stats", "--cache-dir", cacheDir, "--json").Output()
	if err != nil {
		t.Fatalf("strata cache stats: %v\n%s", err, out)
	}
	var c liveCounters
	if err := json.Unmarshal(out, &c); err != nil || !c.Live {
		t.Fatalf("strata cache stats --json (live %v): %v\n%s", c.Live, err, out)
	}
	return c
}
