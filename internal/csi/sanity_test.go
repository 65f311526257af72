package csi

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
)

// TestSanity runs csi-sanity's Identity and Node suites against the
// plugin served over a unix socket. Skipped, as for every node-only
// driver: the specs that need CreateVolume ("should remove target path")
// and the Controller suite (ControllerGetCapabilities only exists for
// csi-sanity's sake; see identity.go).
func TestSanity(t *testing.T) {
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
	cfg.Address = "unix://" + sock
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
