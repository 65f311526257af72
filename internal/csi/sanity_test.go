package csi

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestSanity runs csi-sanity's Identity and Node suites against the
// plugin served over a unix socket. Skipped, as for every node-only
// driver: the specs that need CreateVolume ("should remove target path")
// and the Controller suite (ControllerGetCapabilities only exists for
// csi-sanity's sake; see identity.go).
//
// Ginkgo runs a suite once per process, so the suite runs in a child
// process of the test binary: go test -count=N runs it N times.
func TestSanity(t *testing.T) {
	if os.Getenv(sanityChild) == "1" {
		runSanity(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSanity$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), sanityChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSanity") {
		t.Fatalf("csi-sanity: %v\n%s", err, out)
	}
}

const sanityChild = "STRATA_CSI_SANITY_CHILD"

func runSanity(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	o := DefaultOptions()
	o.NodeID, o.Version = "sanity-node", "test"
	o.StateDir, o.CacheRoot = filepath.Join(dir, "state"), filepath.Join(dir, "cache")
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, "unix://"+sock) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	waitSocket(t, sock)

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
	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	suite.FocusStrings = []string{`Identity Service`, `Node Service`}
	suite.SkipStrings = []string{`ControllerGetCapabilities`, `ValidateVolumeCapabilities`, `should remove target path`}
	reporter.Succinct, reporter.NoColor = true, true
	passed := map[string]bool{}
	ginkgo.ReportAfterSuite("passed specs", func(r ginkgo.Report) {
		for _, s := range r.SpecReports {
			if s.State == types.SpecStatePassed {
				passed[s.FullText()] = true
			}
		}
	})
	if !ginkgo.RunSpecs(t, "Strata CSI sanity", suite, reporter) {
		t.Error("csi-sanity failed")
	}
	sc.Finalize()
	// Guard against a focus that matches nothing: these must have run.
	for _, want := range []string{
		"Identity Service GetPluginInfo should return appropriate information",
		"Identity Service Probe should return appropriate information",
		"Node Service NodeGetInfo should return appropriate values",
		"Node Service NodePublishVolume should fail when no volume capability is provided",
		"Node Service NodeUnpublishVolume should fail when no target path is provided",
	} {
		if !passed[want] {
			t.Errorf("spec %q did not pass (passed: %d specs)", want, len(passed))
		}
	}
	if len(passed) < 10 {
		t.Errorf("only %d csi-sanity specs passed, want the 10 Identity and Node ones", len(passed))
	}
}

func waitSocket(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := filepath.Glob(p); len(ok) == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
}
