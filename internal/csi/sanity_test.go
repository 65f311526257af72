package csi

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratafs/strata/internal/testserver"
)

// TestSanity runs csi-sanity's whole Identity and Node suites against the
// plugin served over a unix socket, including the specs that publish a
// real volume ("should work", "should be idempotent", "should remove
// target path"): the plugin mounts a file:// source in node mode with the
// strata binary of `make build`. Those need root, /dev/fuse and the
// binary; without them (or with -short) only the specs that mount nothing
// run, and under STRATA_E2E=1 their absence fails the test.
//
// csi-sanity creates the volumes it publishes with CreateVolume, which a
// statically provisioned driver does not have: the harness adds a
// Controller that stands in for the admin writing a PersistentVolume (it
// "creates" a volume by returning its attributes) and advertises it in
// GetPluginCapabilities. The plugin's own answer (no controller) is
// checked by TestPluginCapabilities.
//
// Ginkgo runs a suite once per process, so the suite runs in a child
// process of the test binary: go test -count=N runs it N times.
func TestSanity(t *testing.T) {
	if os.Getenv(sanityChild) == "1" {
		runSanity(t, os.Getenv(sanityBin))
		return
	}
	bin := ""
	if !testing.Short() {
		var why string
		if bin, why = sanityStrata(); bin == "" {
			if testserver.Required() {
				t.Fatalf("csi-sanity's publish specs cannot run: %s", why)
			}
			t.Logf("running only the csi-sanity specs that mount nothing: %s", why)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSanity$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), sanityChild+"=1", sanityBin+"="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSanity") {
		t.Fatalf("csi-sanity: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "csi-sanity: ") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

const (
	sanityChild = "STRATA_CSI_SANITY_CHILD"
	sanityBin   = "STRATA_CSI_SANITY_STRATA" // the strata binary node mode runs; "" for the specs that mount nothing
)

// sanityStrata returns the strata binary for the publish specs, or why
// they cannot run here.
func sanityStrata() (bin, why string) {
	if os.Geteuid() != 0 {
		return "", "they need root (mount, bind mounts)"
	}
	if err := unix.Access("/dev/fuse", unix.R_OK|unix.W_OK); err != nil {
		return "", "no /dev/fuse: " + err.Error()
	}
	dir, err := testserver.BinDir()
	if err != nil {
		return "", err.Error()
	}
	bin = filepath.Join(dir, "strata")
	if _, err := os.Stat(bin); err != nil {
		return "", "no strata binary (run make build): " + err.Error()
	}
	return bin, ""
}

// notAdvertised are the Node specs csi-sanity skips because the plugin
// does not advertise their capability (staging, volume stats, expansion).
var notAdvertised = []string{"Node Service NodeStageVolume", "Node Service NodeUnstageVolume",
	"Node Service NodeGetVolumeStats", "Node Service NodeExpandVolume"}

// publishSpecs mount a volume.
var publishSpecs = []string{"should work", "should be idempotent", "should remove target path"}

func runSanity(t *testing.T, strataBin string) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	source := filepath.Join(dir, "bucket")
	if err := os.MkdirAll(filepath.Join(source, "train"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(source, "train", "a.txt"), []byte("sanity\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.NodeID, o.Version, o.StrataBin = "sanity-node", "test", strataBin
	o.StateDir, o.CacheRoot = filepath.Join(dir, "state"), filepath.Join(dir, "cache")
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	d.ready = true
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, sanityIdentity{d})
	csi.RegisterNodeServer(srv, sanityNode{d, map[string]string{"train/a.txt": "sanity\n"}})
	csi.RegisterControllerServer(srv, &sanityController{source: "file://" + source})
	go func() { _ = srv.Serve(l) }()
	defer func() {
		srv.Stop()
		// Every publish was unpublished: nothing may stay mounted.
		for _, m := range mountsUnder(dir) {
			t.Errorf("%s is still mounted after the suite", m)
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	}()

	cfg := sanity.NewTestConfig()
	// csi-test v5.4's Connect reads the connection state after dialling
	// and then waits for it to change: a local socket that is Ready by
	// then leaves it waiting its full minute ("Connection timed out").
	// Dial the unix socket through a passthrough address with a dialer
	// that lets Connect see the Connecting state first.
	cfg.Address = "passthrough:///strata-csi"
	cfg.DialOptions = []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			time.Sleep(50 * time.Millisecond)
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}),
	}
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.IdempotentCount = 2
	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	suite.FocusStrings = []string{`Identity Service`, `Node Service`}
	if strataBin == "" {
		suite.SkipStrings = publishSpecs
	}
	reporter.Succinct, reporter.NoColor = true, true
	passed, skipped := map[string]bool{}, map[string]bool{}
	ginkgo.ReportAfterSuite("passed specs", func(r ginkgo.Report) {
		for _, s := range r.SpecReports {
			switch s.State {
			case types.SpecStatePassed:
				passed[s.FullText()] = true
			case types.SpecStateSkipped:
				skipped[s.FullText()] = true
			}
		}
	})
	if !ginkgo.RunSpecs(t, "Strata CSI sanity", suite, reporter) {
		t.Error("csi-sanity failed")
	}
	sc.Finalize()
	checkSanityRun(t, passed, skipped, strataBin != "")
}

// checkSanityRun: the specs that must have run did, and the only skipped
// ones are for capabilities the plugin does not advertise (or, without a
// strata binary, the publish specs).
func checkSanityRun(t *testing.T, passed, skipped map[string]bool, full bool) {
	want := []string{
		"Identity Service GetPluginInfo should return appropriate information",
		"Identity Service Probe should return appropriate information",
		"Node Service NodeGetInfo should return appropriate values",
		"Node Service NodePublishVolume should fail when no volume capability is provided",
		"Node Service NodeUnpublishVolume should fail when no target path is provided",
	}
	if full {
		want = append(want, "Node Service should work", "Node Service should be idempotent",
			"Node Service NodeUnpublishVolume should remove target path")
	}
	for _, s := range want {
		if !passed[s] {
			t.Errorf("spec %q did not pass (passed: %d specs)", s, len(passed))
		}
	}
	var unexpected []string
	for s := range skipped {
		if !strings.HasPrefix(s, "Node Service") && !strings.HasPrefix(s, "Identity Service") {
			continue // not in the focus
		}
		ok := false
		for _, prefix := range notAdvertised {
			ok = ok || strings.HasPrefix(s, prefix)
		}
		for _, p := range publishSpecs {
			ok = ok || (!full && strings.HasSuffix(s, p))
		}
		if !ok {
			unexpected = append(unexpected, s)
		}
	}
	sort.Strings(unexpected)
	if len(unexpected) > 0 {
		t.Errorf("csi-sanity skipped %d specs the plugin should run:\n%s", len(unexpected), strings.Join(unexpected, "\n"))
	}
	names := make([]string, 0, len(passed))
	for s := range passed {
		names = append(names, s)
	}
	sort.Strings(names)
	t.Logf("passed:\n%s", strings.Join(names, "\n"))
	t.Logf("csi-sanity: %d specs passed, %d skipped (capabilities not advertised%s)", len(passed), len(skipped),
		map[bool]string{true: "", false: "; publish specs not run: -short, or no root or strata binary"}[full])
}
