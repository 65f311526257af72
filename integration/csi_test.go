package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratafs/strata/internal/testserver"
)

// csiVolume is a bucket with a small training set and the attributes
// and secret of a volume pointing at it.
type csiVolume struct {
	srv     *minioServer
	files   map[string][]byte
	want    map[string]string
	attrs   map[string]string
	secrets map[string]string
}

func newCSIVolume(t *testing.T, mode string) csiVolume {
	t.Helper()
	m := testserver.StartMinIO(t)
	srv := &minioServer{m}
	bucket := srv.newBucket(t)
	files := map[string][]byte{
		"train/labels.csv":           []byte("img,label\n"),
		"train/shard-0000.tar":       randData(61, 3<<20+17),
		"train/class-a/img-0001.jpg": randData(62, 90_000),
		"train/class-b/img-0002.jpg": randData(63, 1<<20),
		"elsewhere/not-mounted.txt":  []byte("outside the prefix"),
	}
	put(t, srv.writer(t, bucket), files)
	return csiVolume{
		srv:   srv,
		files: files,
		want:  expect(files, "train/"),
		attrs: map[string]string{
			"source": "s3://" + bucket + "/train", "mode": mode, "endpointURL": m.Endpoint, "region": m.Region,
			"mountOptions": "force-path-style", "metadataTTL": "indefinite",
			"csi.storage.k8s.io/pod.name": "trainer", "csi.storage.k8s.io/pod.namespace": "ml",
			// What kubelet adds (podInfoOnMount) for a PersistentVolume.
			"csi.storage.k8s.io/ephemeral": "false",
		},
		secrets: map[string]string{"AWS_ACCESS_KEY_ID": m.AccessKey, "AWS_SECRET_ACCESS_KEY": m.SecretKey},
	}
}

// sidecarProc is a running `strata sidecar`.
type sidecarProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped; err is then set
	err    error
	log    string
}

func startSidecar(t *testing.T, handoff, cacheDir string) *sidecarProc {
	t.Helper()
	return startSidecarVia(t, handoff, cacheDir)
}

// startSidecarVia runs the sidecar under a wrapper command (prefix), such
// as setpriv dropping capabilities as a pod's securityContext does.
func startSidecarVia(t *testing.T, handoff, cacheDir string, prefix ...string) *sidecarProc {
	t.Helper()
	s := &sidecarProc{exited: make(chan struct{}), log: filepath.Join(t.TempDir(), "sidecar.log")}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := append(prefix, testserver.Binary(t, "strata"), "sidecar", "--handoff-dir", handoff, "--cache-dir", cacheDir, "--log-level", "debug")
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Env = noCredentials()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill() // it may exit meanwhile: <-s.exited waits either way
			<-s.exited
		}
		if t.Failed() {
			t.Logf("strata sidecar log:\n%s", s.logTail())
		}
	})
	return s
}

func (s *sidecarProc) logTail() string {
	b, _ := os.ReadFile(s.log)
	return csiTail(b, 12000)
}

// TestCSISidecarMode: NodePublishVolume mounts the target on a /dev/fuse
// descriptor, a separate `strata sidecar` process takes the descriptor
// over the hand-off socket and serves it with the volume's secret,
// reads through the target match the bucket, NodeUnpublishVolume unmounts
// and the sidecar exits 0.
func TestCSISidecarMode(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "sidecar")
	p := startCSI(t)
	kubelet := t.TempDir()
	// A real pod UID: the hand-off socket path is then longer than
	// sun_path, as on a real node.
	target, handoff := podTarget(t, kubelet, "6f1c2a4e-8d3b-4b8e-9a51-2f7d0c9e4b11", "dataset")

	// Argument checks come back as InvalidArgument.
	bad := publishReq("vol-bad", target, map[string]string{"source": "s3://bkt", "metadataTtl": "1m"}, nil)
	if err := p.publish(bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("typo in attributes: %v, want InvalidArgument", err)
	}

	req := publishReq("vol-sidecar", target, vol.attrs, vol.secrets)
	if err := p.publish(req); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	if fstype, _ := csiMountAt(target); fstype != "fuse.strata" {
		t.Fatalf("target mounted as %q, want fuse.strata", fstype)
	}
	if err := p.publish(req); err != nil {
		t.Fatalf("NodePublishVolume again (idempotent): %v", err)
	}
	rw := publishReq("vol-sidecar", target, map[string]string{}, vol.secrets)
	for k, v := range vol.attrs {
		rw.VolumeContext[k] = v
	}
	rw.VolumeContext["readOnly"] = "false"
	rw.VolumeCapability.AccessMode.Mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	if err := p.publish(rw); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("publishing the target again read-write: %v, want AlreadyExists", err)
	}
	socket := filepath.Join(handoff, "dataset", "socket")
	if _, err := os.Stat(socket); err != nil {
		t.Fatalf("hand-off socket: %v", err)
	}

	sc := startSidecar(t, handoff, t.TempDir())
	csiWaitFile(t, filepath.Join(handoff, "dataset", "ready"), 60*time.Second, sc.logTail)
	probe := exec.Command(testserver.Binary(t, "strata"), "sidecar", "--probe", "--handoff-dir", handoff)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("strata sidecar --probe: %v: %s", err, out)
	}

	got := tree(t, target)
	if d := diffTrees(vol.want, got); d != "" {
		t.Fatalf("files through the sidecar's mount differ from the bucket:\n%s", d)
	}

	if err := p.unpublish("vol-sidecar", target); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if fstype, _ := csiMountAt(target); fstype != "" {
		t.Fatalf("target still mounted (%s) after NodeUnpublishVolume", fstype)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("target not removed: %v", err)
	}
	select {
	case <-sc.exited:
		if sc.err != nil {
			t.Fatalf("sidecar exited with %v, want 0", sc.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar still running 30s after NodeUnpublishVolume")
	}
	if err := p.unpublish("vol-sidecar", target); err != nil {
		t.Fatalf("NodeUnpublishVolume again (idempotent): %v", err)
	}
}

// TestCSISidecarExitsOnSIGTERM: the native-sidecar ending. After the main
// containers exit, kubelet sends SIGTERM; the sidecar stops at once with
// status 0 so the Job completes, and the plugin unmounts afterwards.
func TestCSISidecarExitsOnSIGTERM(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "sidecar")
	p := startCSI(t)
	target, handoff := podTarget(t, t.TempDir(), "0d5a", "data")
	if err := p.publish(publishReq("vol-term", target, vol.attrs, vol.secrets)); err != nil {
		t.Fatal(err)
	}
	sc := startSidecar(t, handoff, t.TempDir())
	csiWaitFile(t, filepath.Join(handoff, "data", "ready"), 60*time.Second, sc.logTail)
	if b, err := os.ReadFile(filepath.Join(target, "labels.csv")); err != nil || string(b) != "img,label\n" {
		t.Fatalf("read through the mount: %q, %v", b, err)
	}
	if err := sc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sc.exited:
		if sc.err != nil {
			t.Fatalf("sidecar exited with %v after SIGTERM, want 0", sc.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("sidecar still running 20s after the signal")
	}
	if err := p.unpublish("vol-term", target); err != nil {
		t.Fatalf("NodeUnpublishVolume after the sidecar left: %v", err)
	}
	if fstype, _ := csiMountAt(target); fstype != "" {
		t.Fatalf("target still mounted (%s)", fstype)
	}
}

// TestCSINodeMode: two pods on the node share one privileged mount
// (bind-mounted into both targets); it outlives the first pod's
// unpublish, stops with the last, and a later job on the same dataset
// finds the node's cache warm: it reads everything without a GET.
func TestCSINodeMode(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "node")
	p := startCSI(t)
	kubelet := t.TempDir()
	a, _ := podTarget(t, kubelet, "pod-a", "data")
	b, _ := podTarget(t, kubelet, "pod-b", "data")
	for _, target := range []string{a, b, a} { // the second publish of a is a retry
		if err := p.publish(publishReq("vol-node", target, vol.attrs, vol.secrets)); err != nil {
			t.Fatalf("NodePublishVolume %s: %v", target, err)
		}
	}
	other := publishReq("vol-node", a, map[string]string{}, map[string]string{"AWS_ACCESS_KEY_ID": "someone-else"})
	for k, v := range vol.attrs {
		other.VolumeContext[k] = v
	}
	if err := p.publish(other); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("publishing target a with other credentials: %v, want AlreadyExists", err)
	}
	fsA, devA := csiMountAt(a)
	fsB, devB := csiMountAt(b)
	if fsA != "fuse.strata" || devA != devB {
		t.Fatalf("targets are %s %s and %s %s; want binds of one fuse.strata mount", fsA, devA, fsB, devB)
	}
	shares, _ := filepath.Glob(filepath.Join(p.dir, "state", "node", "*"))
	users, _ := filepath.Glob(filepath.Join(p.dir, "state", "node", "*", "targets", "*"))
	if len(shares) != 1 || len(users) != 2 {
		t.Fatalf("%d shared mounts with %d users, want 1 with 2", len(shares), len(users))
	}
	mnt := filepath.Join(shares[0], "mnt")
	if d := diffTrees(vol.want, tree(t, a)); d != "" {
		t.Fatalf("pod a reads differ from the bucket:\n%s", d)
	}

	// A restarted plugin knows the users from its state directory.
	p.stop()
	p = startCSIIn(t, p.dir)

	if err := p.unpublish("vol-node", a); err != nil {
		t.Fatalf("NodeUnpublishVolume a: %v", err)
	}
	if fs, _ := csiMountAt(a); fs != "" {
		t.Fatal("target a still mounted")
	}
	if fs, _ := csiMountAt(mnt); fs != "fuse.strata" {
		t.Fatal("the shared mount stopped while pod b still uses it")
	}
	if d := diffTrees(vol.want, tree(t, b)); d != "" {
		t.Fatalf("pod b reads differ after pod a left:\n%s", d)
	}
	if err := p.unpublish("vol-node", b); err != nil {
		t.Fatalf("NodeUnpublishVolume b: %v", err)
	}
	if fs, _ := csiMountAt(mnt); fs != "" {
		t.Fatal("the shared mount outlived its last user")
	}
	caches, _ := filepath.Glob(filepath.Join(p.dir, "cache", "*"))
	if len(caches) != 1 {
		t.Fatalf("cache dirs %v, want one per dataset", caches)
	}
	first, ok := readSession(caches[0])
	if !ok || first.Running || first.FetchedBytes == 0 {
		t.Fatalf("first job's session %+v (found %v): want a finished mount that fetched", first, ok)
	}

	// The next job on the node: same dataset, warm cache, no GET.
	c, _ := podTarget(t, kubelet, "pod-c", "data")
	if err := p.publish(publishReq("vol-node", c, vol.attrs, vol.secrets)); err != nil {
		t.Fatalf("NodePublishVolume c: %v", err)
	}
	if d := diffTrees(vol.want, tree(t, c)); d != "" {
		t.Fatalf("pod c reads differ:\n%s", d)
	}
	if err := p.unpublish("vol-node", c); err != nil {
		t.Fatalf("NodeUnpublishVolume c: %v", err)
	}
	second, ok := readSession(caches[0])
	if !ok || second.Running || second.PID == first.PID {
		t.Fatalf("second job's session %+v: want a new, finished mount", second)
	}
	if second.FetchedBytes != 0 || second.Fetches != 0 {
		t.Fatalf("second job fetched %d bytes in %d GETs; the node's cache should have served it all", second.FetchedBytes, second.Fetches)
	}
	var pt struct {
		Passthrough bool `json:"passthrough"`
	}
	if raw, err := os.ReadFile(filepath.Join(caches[0], "session.json")); err == nil && json.Unmarshal(raw, &pt) == nil && pt.Passthrough && second.PTOpens == 0 {
		t.Fatal("node mode has passthrough but the warm job opened no file through it")
	}
	if err := p.unpublish("vol-node", c); err != nil {
		t.Fatalf("NodeUnpublishVolume again (idempotent): %v", err)
	}
}

// TestCSISidecarTwoVolumes: one sidecar serves every Strata volume of its
// pod, each from its own hand-off, and exits once both are unpublished.
func TestCSISidecarTwoVolumes(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "sidecar")
	p := startCSI(t)
	kubelet := t.TempDir()
	train, handoff := podTarget(t, kubelet, "91aa", "train")
	labels, _ := podTarget(t, kubelet, "91aa", "labels")
	sub := map[string]string{}
	for k, v := range vol.attrs {
		sub[k] = v
	}
	sub["source"] = strings.TrimSuffix(vol.attrs["source"], "/train") + "/train/class-a"
	for _, v := range []struct {
		id, target string
		attrs      map[string]string
	}{{"vol-train", train, vol.attrs}, {"vol-labels", labels, sub}} {
		if err := p.publish(publishReq(v.id, v.target, v.attrs, vol.secrets)); err != nil {
			t.Fatalf("NodePublishVolume %s: %v", v.id, err)
		}
	}
	sc := startSidecar(t, handoff, t.TempDir())
	for _, name := range []string{"train", "labels"} {
		csiWaitFile(t, filepath.Join(handoff, name, "ready"), 60*time.Second, sc.logTail)
	}
	if d := diffTrees(vol.want, tree(t, train)); d != "" {
		t.Fatalf("train volume differs:\n%s", d)
	}
	if d := diffTrees(expect(vol.files, "train/class-a/"), tree(t, labels)); d != "" {
		t.Fatalf("second volume differs:\n%s", d)
	}
	if err := p.unpublish("vol-train", train); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sc.exited:
		t.Fatalf("sidecar exited (%v) while it still served a volume", sc.err)
	case <-time.After(2 * time.Second):
	}
	if d := diffTrees(expect(vol.files, "train/class-a/"), tree(t, labels)); d != "" {
		t.Fatalf("second volume differs after the first left:\n%s", d)
	}
	if err := p.unpublish("vol-labels", labels); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sc.exited:
		if sc.err != nil {
			t.Fatalf("sidecar exited with %v, want 0", sc.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar still running 30s after its last volume was unpublished")
	}
}
