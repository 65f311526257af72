package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Tests of the CSI driver against a hostile tenant: one who controls a
// pod (and so its emptyDirs) and the attributes and Secret of its own
// volumes, and tries to reach what is not theirs through the plugin,
// which runs as root on the node.

// plantVictim makes a directory of the node the tenant cannot reach
// (0700), holding files with the names the plugin uses in a hand-off
// directory, and returns it.
func plantVictim(t *testing.T) string {
	t.Helper()
	victim := filepath.Join(t.TempDir(), "node-private")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ready", "error", "socket"} {
		if err := os.WriteFile(filepath.Join(victim, name), []byte("the node's "+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return victim
}

// checkVictim fails unless victim is as plantVictim left it.
func checkVictim(t *testing.T, what, victim string) {
	t.Helper()
	st, err := os.Lstat(victim)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("%s: the plugin changed the mode of %s to %v (want 0700)", what, victim, st.Mode().Perm())
	}
	ents, _ := os.ReadDir(victim)
	if len(ents) != 3 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%s: %s now holds %v, want ready, error and socket untouched", what, victim, names)
	}
	for _, name := range []string{"ready", "error", "socket"} {
		st, err := os.Lstat(filepath.Join(victim, name))
		if err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: the plugin removed or replaced %s/%s (%v)", what, victim, name, err)
		}
	}
}

// TestCSIHandoffDirSymlink: a sidecar-mode volume's hand-off directory
// is <pod's emptyDir>/<volume>, a place the pod's containers write. A
// tenant that plants a symlink there, before the publish or while the
// volume waits for its sidecar, must not get the plugin to chmod 0777,
// empty, or put its socket in the directory the link points to: the
// publish is refused, and unpublish removes only what it made.
func TestCSIHandoffDirSymlink(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "sidecar")
	p := startCSI(t)
	kubelet := t.TempDir()

	// Planted before NodePublishVolume.
	victim := plantVictim(t)
	target, handoff := podTarget(t, kubelet, "pod-symlink", "data")
	if err := os.Symlink(victim, filepath.Join(handoff, "data")); err != nil {
		t.Fatal(err)
	}
	err := p.publish(publishReq("vol-symlink", target, vol.attrs, vol.secrets))
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("publish with the hand-off directory a symlink: %v, want FailedPrecondition", err)
	}
	checkVictim(t, "symlink planted before the publish", victim)
	if fs, _ := csiMountAt(target); fs != "" {
		if err := p.unpublish("vol-symlink", target); err != nil {
			t.Fatal(err)
		}
	}

	// Swapped in while the plugin waits for the sidecar: the unpublish
	// (which closes the listener and removes the socket) must not remove
	// the victim's file of that name.
	victim2 := plantVictim(t)
	target2, handoff2 := podTarget(t, kubelet, "pod-swap", "data")
	if err := p.publish(publishReq("vol-swap", target2, vol.attrs, vol.secrets)); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	dir := filepath.Join(handoff2, "data")
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim2, dir); err != nil {
		t.Fatal(err)
	}
	if err := p.unpublish("vol-swap", target2); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	checkVictim(t, "symlink swapped in before the unpublish", victim2)
}

// TestCSINodeCacheNeedsTheBackendsYes: a node-mode cache is shared by
// the volumes of one identity (access key id), and kept warm after its
// last user leaves. A tenant who knows another's access key id (it is
// not a secret) but not the secret must not read what the cache holds:
// its mount's credentials check has to fail, also when the tenant makes
// the check fail as if the endpoint were unreachable (a session token
// that cannot be sent), which with metadataTTL indefinite would start
// the mount offline on the warm cache.
func TestCSINodeCacheNeedsTheBackendsYes(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "node")
	p := startCSI(t)
	kubelet := t.TempDir()

	target, _ := podTarget(t, kubelet, "pod-owner", "data")
	if err := p.publish(publishReq("vol-owner", target, vol.attrs, vol.secrets)); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	if d := diffTrees(vol.want, tree(t, target)); d != "" {
		t.Fatalf("reads differ from the bucket:\n%s", d)
	}
	if err := p.unpublish("vol-owner", target); err != nil {
		t.Fatal(err)
	}

	for i, tc := range []struct{ what, token string }{
		{"a wrong secret", ""},
		{"a wrong secret and a session token with a newline", "x\ny"},
		{"a wrong secret and a session token with a control character", "x\x01y"},
	} {
		secrets := map[string]string{"AWS_ACCESS_KEY_ID": vol.secrets["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
		if tc.token != "" {
			secrets["AWS_SESSION_TOKEN"] = tc.token
		}
		target, _ := podTarget(t, kubelet, "pod-thief-"+strings.Repeat("x", i+1), "data")
		err := p.publish(publishReq("vol-thief", target, vol.attrs, secrets))
		if err == nil {
			got := tree(t, target)
			t.Errorf("%s: the volume was published and reads %d files of the owner's cache", tc.what, len(got))
			if err := p.unpublish("vol-thief", target); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if tc.token != "" && status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument (a value no credential has)", tc.what, err)
		}
		if strings.Contains(err.Error(), "not-the-secret") || (tc.token != "" && strings.Contains(err.Error(), tc.token)) {
			t.Errorf("%s: the error shows a secret value: %v", tc.what, err)
		}
	}

	// The endpoint really down: the backend cannot check a secret, so
	// only the credentials that passed its check on this cache before
	// may start offline on it.
	if err := vol.srv.m.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vol.srv.m.Restart() })
	thief := map[string]string{"AWS_ACCESS_KEY_ID": vol.secrets["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
	target, _ = podTarget(t, kubelet, "pod-thief-offline", "data")
	if err := p.publish(publishReq("vol-thief", target, vol.attrs, thief)); err == nil {
		t.Errorf("endpoint down, a wrong secret: the volume was published and reads %d files of the owner's cache", len(tree(t, target)))
		if err := p.unpublish("vol-thief", target); err != nil {
			t.Fatal(err)
		}
	}
	target, _ = podTarget(t, kubelet, "pod-owner-offline", "data")
	if err := p.publish(publishReq("vol-owner", target, vol.attrs, vol.secrets)); err != nil {
		t.Fatalf("endpoint down, the owner's secret that passed the check before: %v (want the cache served offline)", err)
	}
	if d := diffTrees(vol.want, tree(t, target)); d != "" {
		t.Errorf("the owner's offline reads differ from the bucket:\n%s", d)
	}
	if err := p.unpublish("vol-owner", target); err != nil {
		t.Fatal(err)
	}
}

// TestCSIInlineNodeModeFileSource: a file:// source reads a directory of
// the machine the mount runs on. In node mode that is the node, as the
// privileged plugin sees it (kubelet's pods directory with every pod's
// Secrets, the plugin's state), so an inline volume (any pod author) may
// not name one even on a driver that lets inline volumes use node mode;
// a PersistentVolume (the admin) may, and sidecar mode reads the pod's
// own container.
func TestCSIInlineNodeModeFileSource(t *testing.T) {
	requireFUSE(t)
	nodeDir := filepath.Join(t.TempDir(), "kubelet-pods")
	if err := os.MkdirAll(filepath.Join(nodeDir, "other-pod"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nodeDir, "other-pod", "token"), []byte("another tenant's token"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startCSIIn(t, t.TempDir(), "--allow-inline-node-mode")
	kubelet := t.TempDir()
	attrs := map[string]string{"source": "file://" + nodeDir, "mode": "node", "csi.storage.k8s.io/ephemeral": "true"}
	target, _ := podTarget(t, kubelet, "pod-file", "data")
	err := p.publish(publishReq("vol-file", target, attrs, nil))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "file://") {
		t.Errorf("inline node-mode volume with a file:// source: %v, want PermissionDenied naming file://", err)
	}
	if fs, _ := csiMountAt(target); fs != "" {
		if b, err := os.ReadFile(filepath.Join(target, "other-pod", "token")); err == nil {
			t.Errorf("the tenant's volume reads the node's file: %q", b)
		}
		if err := p.unpublish("vol-file", target); err != nil {
			t.Fatal(err)
		}
	}
	// Kubelet not saying whether the volume is inline: treated as inline.
	delete(attrs, "csi.storage.k8s.io/ephemeral")
	target, _ = podTarget(t, kubelet, "pod-file-unknown", "data")
	if err := p.publish(publishReq("vol-file", target, attrs, nil)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("node-mode volume of unknown origin with a file:// source: %v, want PermissionDenied", err)
		if fs, _ := csiMountAt(target); fs != "" {
			_ = p.unpublish("vol-file", target)
		}
	}

	// A PersistentVolume may.
	attrs["csi.storage.k8s.io/ephemeral"] = "false"
	target, _ = podTarget(t, kubelet, "pod-file-pv", "data")
	if err := p.publish(publishReq("vol-file-pv", target, attrs, nil)); err != nil {
		t.Fatalf("PersistentVolume with a file:// source: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "other-pod", "token")); err != nil || string(b) != "another tenant's token" {
		t.Errorf("PersistentVolume with a file:// source reads %q, %v", b, err)
	}
	if err := p.unpublish("vol-file-pv", target); err != nil {
		t.Fatal(err)
	}
}

// TestCSIInlineNodeModeNodeIdentity: a node-mode volume without a Secret
// reads with the node's identity (the plugin's instance role or service
// account). On a driver that lets inline volumes use node mode, a pod
// author must not borrow it: an inline volume without a Secret is refused
// unless it reads anonymously; a PersistentVolume (the admin) may use it.
func TestCSIInlineNodeModeNodeIdentity(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "node")
	m := vol.srv.m
	// The node's identity: credentials the plugin finds on its own.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "credentials"),
		[]byte("[default]\naws_access_key_id = "+m.AccessKey+"\naws_secret_access_key = "+m.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	p := startCSIIn(t, t.TempDir(), "--allow-inline-node-mode", "--mount-arg=--endpoint-url="+m.Endpoint,
		"--mount-arg=--force-path-style", "--mount-arg=--region="+m.Region)
	kubelet := t.TempDir()
	inline := map[string]string{"source": vol.attrs["source"], "mode": "node", "csi.storage.k8s.io/ephemeral": "true"}
	for i, secrets := range []map[string]string{
		nil,
		// An id without its secret: the SDK falls back to the node's.
		{"AWS_ACCESS_KEY_ID": m.AccessKey},
	} {
		target, _ := podTarget(t, kubelet, "pod-ambient-"+strings.Repeat("x", i+1), "data")
		err := p.publish(publishReq("vol-ambient", target, inline, secrets))
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "Secret") {
			t.Errorf("inline node-mode volume with secret keys %v: %v, want PermissionDenied asking for a Secret", secrets, err)
		}
		if fs, _ := csiMountAt(target); fs != "" {
			t.Errorf("secret keys %v: the tenant reads %d files with the node's identity", secrets, len(tree(t, target)))
			if err := p.unpublish("vol-ambient", target); err != nil {
				t.Fatal(err)
			}
		}
	}
	// With its own Secret it works, and so does a PersistentVolume
	// without one.
	target, _ := podTarget(t, kubelet, "pod-own-secret", "data")
	if err := p.publish(publishReq("vol-own", target, inline, vol.secrets)); err != nil {
		t.Fatalf("inline node-mode volume with its own Secret: %v", err)
	}
	if err := p.unpublish("vol-own", target); err != nil {
		t.Fatal(err)
	}
	pv := map[string]string{"source": vol.attrs["source"], "mode": "node", "csi.storage.k8s.io/ephemeral": "false"}
	target, _ = podTarget(t, kubelet, "pod-pv", "data")
	if err := p.publish(publishReq("vol-pv", target, pv, nil)); err != nil {
		t.Fatalf("PersistentVolume without a Secret (the node's identity): %v", err)
	}
	if d := diffTrees(vol.want, tree(t, target)); d != "" {
		t.Errorf("PersistentVolume reads differ from the bucket:\n%s", d)
	}
	if err := p.unpublish("vol-pv", target); err != nil {
		t.Fatal(err)
	}
}

// TestCSINodeModeNoSetuid: a volume may set uid, gid and file-mode (any
// pod author can, for inline volumes), so it can make every file of its
// bucket look setuid root. The node-mode mount and its bind in the pod
// must then be nosuid (and nodev), so that the bits mean nothing.
func TestCSINodeModeNoSetuid(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "node")
	p := startCSI(t)
	kubelet := t.TempDir()
	attrs := map[string]string{}
	for k, v := range vol.attrs {
		attrs[k] = v
	}
	attrs["mountOptions"] = "force-path-style,uid=0,gid=0,file-mode=6755"
	for _, readOnly := range []string{"true", "false"} {
		attrs["readOnly"] = readOnly
		target, _ := podTarget(t, kubelet, "pod-setuid-"+readOnly, "data")
		req := publishReq("vol-setuid-"+readOnly, target, attrs, vol.secrets)
		if readOnly == "false" {
			req.VolumeCapability.AccessMode.Mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
		}
		if err := p.publish(req); err != nil {
			t.Fatalf("readOnly %s: NodePublishVolume: %v", readOnly, err)
		}
		b, _ := os.ReadFile("/proc/self/mountinfo")
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && csiUnescape(f[4]) == target {
				found = true
				opts := "," + f[5] + ","
				for _, want := range []string{",nosuid,", ",nodev,"} {
					if !strings.Contains(opts, want) {
						t.Errorf("readOnly %s: the pod's mount %s has options %s, want %s", readOnly, target, f[5], strings.Trim(want, ","))
					}
				}
			}
		}
		if !found {
			t.Errorf("%s not in mountinfo", target)
		}
		if err := p.unpublish("vol-setuid-"+readOnly, target); err != nil {
			t.Fatal(err)
		}
	}
}
