package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// StrataSidecar serves a mount the way the CSI driver's sidecar mode does
// on a node, without a cluster: a `strata csi` plugin publishes the volume
// (it opens /dev/fuse and mounts the pod's target on it), and `strata
// sidecar`, its CAP_SYS_ADMIN dropped with setpriv as a pod's default
// securityContext drops it, takes the descriptor over the hand-off socket
// and serves the volume; the plugin registers its cache files for
// passthrough. Unmounting is NodeUnpublishVolume, after which the sidecar
// exits, as in a pod.
//
// The spec's Mountpoint must be a kubelet-style target
// (.../pods/UID/volumes/kubernetes.io~csi/VOLUME/mount, SidecarTarget) and
// its CacheDir CACHE_ROOT/VOLUME, where the sidecar keeps the volume's cache.
type StrataSidecar struct {
	// Bin is the strata binary (default: strata in BinDir).
	Bin string
	// Flags are mount flags given to the volume as its mountOptions
	// attribute (without "--", e.g. "passthrough=off").
	Flags []string
}

func (s *StrataSidecar) Name() string { return "strata-sidecar" }

func (s *StrataSidecar) bin() (string, error) {
	if s.Bin != "" {
		return s.Bin, nil
	}
	return Tool("strata")
}

// Available checks the binary and setpriv.
func (s *StrataSidecar) Available(ctx context.Context) error {
	if err := (&Strata{Bin: s.Bin}).Available(ctx); err != nil {
		return err
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		return fmt.Errorf("setpriv (util-linux) is needed to drop the sidecar's CAP_SYS_ADMIN: %w", err)
	}
	return nil
}

// SidecarTarget returns the target path kubelet would give a pod's CSI
// volume under base (Mount puts the pod's hand-off emptyDir beside it).
func SidecarTarget(base, volume string) string {
	return filepath.Join(base, "kubelet", "pods", "5e7b0000-bench", "volumes", "kubernetes.io~csi", volume, "mount")
}

// Mount starts the plugin, publishes the volume and starts the sidecar.
func (s *StrataSidecar) Mount(ctx context.Context, spec MountSpec) (*Mount, error) {
	bin, err := s.bin()
	if err != nil {
		return nil, err
	}
	if spec.Scheme == "gs" {
		return nil, errors.New("workload: the sidecar system runs on S3 only")
	}
	volume := filepath.Base(spec.CacheDir)
	// target is POD/volumes/kubernetes.io~csi/VOLUME/mount.
	target := spec.Mountpoint
	handoff := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(target))), "kubernetes.io~empty-dir", "strata-handoff")
	if filepath.Base(filepath.Dir(target)) != volume || filepath.Base(target) != "mount" {
		return nil, fmt.Errorf("workload: sidecar target %s is not .../kubernetes.io~csi/%s/mount", target, volume)
	}
	for _, d := range []string{filepath.Dir(target), handoff, spec.CacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("workload: sidecar: %w", err)
		}
	}
	dir, err := os.MkdirTemp(filepath.Dir(filepath.Dir(spec.LogPath)), "csi-")
	if err != nil {
		return nil, fmt.Errorf("workload: sidecar: %w", err)
	}
	sock := filepath.Join(dir, "csi.sock")
	plugin, err := StartProc("strata csi", spec.LogPath+".csi", nil, bin, "csi", "--endpoint", "unix://"+sock,
		"--node-id", "bench", "--state-dir", filepath.Join(dir, "state"), "--cache-root", filepath.Join(dir, "cache"),
		"--handoff-timeout", "2m")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Mount, error) {
		_ = Unmount(context.Background(), target)
		_ = plugin.Stop(5 * time.Second)
		_ = os.RemoveAll(dir)
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fail(fmt.Errorf("workload: csi client: %w", err))
	}
	if err := waitProbe(ctx, csi.NewIdentityClient(conn), plugin); err != nil {
		conn.Close()
		return fail(err)
	}
	node := csi.NewNodeClient(conn)
	opts := append([]string{"force-path-style"}, s.Flags...)
	attrs := map[string]string{"source": spec.Source(), "mode": "sidecar", "endpointURL": spec.Endpoint,
		"region": spec.Region, "mountOptions": strings.Join(opts, ","),
		"csi.storage.k8s.io/pod.name": "bench", "csi.storage.k8s.io/pod.namespace": "bench",
		"csi.storage.k8s.io/ephemeral": "false"}
	if !spec.Writable {
		attrs["readOnly"] = "true"
	}
	secrets := map[string]string{"AWS_ACCESS_KEY_ID": spec.AccessKey, "AWS_SECRET_ACCESS_KEY": spec.SecretKey}
	const volumeID = "bench-volume"
	pctx, cancel := context.WithTimeout(ctx, mountTimeout)
	_, err = node.NodePublishVolume(pctx, &csi.NodePublishVolumeRequest{VolumeId: volumeID, TargetPath: target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}},
		VolumeContext: attrs, Secrets: secrets})
	cancel()
	if err != nil {
		conn.Close()
		return fail(fmt.Errorf("workload: NodePublishVolume: %w\n%s", err, plugin.LogTail(2048)))
	}
	args := []string{"--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--", bin, "sidecar",
		"--handoff-dir", handoff, "--cache-dir", filepath.Dir(spec.CacheDir)}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		conn.Close()
		return fail(fmt.Errorf("workload: %w", err))
	}
	// No credentials in the environment: the volume's secret reaches the
	// sidecar over the hand-off socket.
	sc, err := StartProc("strata sidecar", spec.LogPath, []string{"!AWS_ACCESS_KEY_ID", "!AWS_SECRET_ACCESS_KEY"}, setpriv, args...)
	if err != nil {
		conn.Close()
		return fail(err)
	}
	unpublish := func(ctx context.Context) error {
		uctx, cancel := context.WithTimeout(ctx, mountTimeout)
		_, err := node.NodeUnpublishVolume(uctx, &csi.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: target})
		cancel()
		if err != nil {
			err = fmt.Errorf("workload: NodeUnpublishVolume: %w", err)
		}
		if !sc.Wait(time.Minute) {
			err = errors.Join(err, errors.New("workload: strata sidecar did not exit after unpublish"), sc.Stop(5*time.Second))
		}
		conn.Close()
		err = errors.Join(err, plugin.Stop(20*time.Second), Unmount(ctx, target))
		_ = os.RemoveAll(dir)
		return err
	}
	ready := filepath.Join(handoff, volume, "ready")
	for deadline := time.Now().Add(mountTimeout); ; {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if done, _ := sc.Exited(); done || time.Now().After(deadline) {
			err := fmt.Errorf("workload: strata sidecar not ready (exited %v):\n%s", done, sc.LogTail(2048))
			return nil, errors.Join(err, unpublish(context.Background()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd := fmt.Sprintf("strata csi publishes %s (mode=sidecar, mountOptions=%s); setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin -- strata sidecar --handoff-dir HANDOFF --cache-dir CACHE_ROOT",
		spec.Source(), attrs["mountOptions"])
	return &Mount{Root: target, Proc: sc, Command: cmd, Unmounter: unpublish}, nil
}

// waitProbe waits until the plugin answers Probe ready.
func waitProbe(ctx context.Context, id csi.IdentityClient, plugin *Proc) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err := id.Probe(pctx, &csi.ProbeRequest{})
		cancel()
		if err == nil && r.GetReady().GetValue() {
			return nil
		}
		if done, _ := plugin.Exited(); done || time.Now().After(deadline) {
			return fmt.Errorf("workload: strata csi not ready (%v):\n%s", err, plugin.LogTail(2048))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
