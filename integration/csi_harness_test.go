package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratafs/strata/internal/testserver"
)

// csiPlugin is a running `strata csi` and a gRPC client to it.
type csiPlugin struct {
	t        *testing.T
	dir      string // state-dir, cache-root and the socket live here
	node     csi.NodeClient
	identity csi.IdentityClient
	cmd      *exec.Cmd
	logPath  string
}

// noCredentials is the test's environment without AWS credentials, so a
// mount that works proves the volume's secret reached it.
func noCredentials() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "GOOGLE_") {
			env = append(env, kv)
		}
	}
	return env
}

// startCSI runs `strata csi` on a unix socket and waits until it probes ready.
func startCSI(t *testing.T) *csiPlugin { return startCSIIn(t, t.TempDir()) }

// startCSIIn starts the plugin on dir's state, as a restarted plugin
// would, with extra flags if given.
func startCSIIn(t *testing.T, dir string, extra ...string) *csiPlugin {
	t.Helper()
	bin := testserver.Binary(t, "strata")
	p := &csiPlugin{t: t, dir: dir, logPath: filepath.Join(dir, "csi.log")}
	sock := filepath.Join(dir, "csi.sock")
	logf, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, "csi", "--endpoint", "unix://"+sock, "--node-id", "e2e-node",
		"--state-dir", filepath.Join(dir, "state"), "--cache-root", filepath.Join(dir, "cache"),
		"--handoff-timeout", "2m", "--log-level", "debug")
	p.cmd.Args = append(p.cmd.Args, extra...)
	p.cmd.Env = noCredentials()
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			t.Logf("strata csi log:\n%s", csiTail(b, 12000))
		}
		// Nothing may stay mounted under the test's directories.
		for _, m := range csiMountsUnder(dir) {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Logf("clean-up: unmount %s: %v", m, err)
			}
		}
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p.node, p.identity = csi.NewNodeClient(conn), csi.NewIdentityClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := p.identity.Probe(ctx, &csi.ProbeRequest{})
		cancel()
		if err == nil && r.GetReady().GetValue() {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata csi not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *csiPlugin) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // if it is gone already, Wait says how
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("strata csi exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill() // the test fails either way
		p.t.Errorf("strata csi still running 20s after SIGTERM (killed: %v)", <-done)
	}
	p.cmd = nil
}

// podTarget makes the directories kubelet makes for a pod's CSI volume
// and returns the target path and the pod's hand-off emptyDir.
func podTarget(t *testing.T, kubelet, podUID, volume string) (target, handoff string) {
	t.Helper()
	pod := filepath.Join(kubelet, "pods", podUID)
	target = filepath.Join(pod, "volumes", "kubernetes.io~csi", volume, "mount")
	handoff = filepath.Join(pod, "volumes", "kubernetes.io~empty-dir", "strata-handoff")
	for _, d := range []string{filepath.Dir(target), handoff} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range csiMountsUnder(pod) {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Logf("clean-up: unmount %s: %v", m, err)
			}
		}
	})
	return target, handoff
}

func publishReq(volumeID, target string, attrs, secrets map[string]string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   volumeID,
		TargetPath: target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		},
		VolumeContext: attrs,
		Secrets:       secrets,
	}
}

func (p *csiPlugin) publish(req *csi.NodePublishVolumeRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := p.node.NodePublishVolume(ctx, req)
	return err
}

func (p *csiPlugin) unpublish(volumeID, target string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := p.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: target})
	return err
}

// csiMountAt returns the fstype and device of the mount at p ("" if none).
func csiMountAt(p string) (fstype, dev string) {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && csiUnescape(f[4]) == p {
			for i := 6; i < len(f)-1; i++ {
				if f[i] == "-" {
					fstype, dev = f[i+1], f[2]
				}
			}
		}
	}
	return fstype, dev
}

func csiMountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(csiUnescape(f[4]), dir+"/") {
			out = append([]string{csiUnescape(f[4])}, out...)
		}
	}
	return out
}

func csiUnescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

func csiTail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// csiWaitFile waits for p to exist.
func csiWaitFile(t *testing.T, p string, timeout time.Duration, why func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s\n%s", p, timeout, why())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
