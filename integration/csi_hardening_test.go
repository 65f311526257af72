package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCSIPublishUnpublishRace: kubelet retries, and a tenant can make it
// publish and unpublish its volumes in quick succession (pods created and
// deleted). Concurrent calls on one target are refused with Aborted or
// done one after the other; afterwards nothing stays mounted, no hand-off
// socket is left, and the plugin holds no more descriptors than before.
func TestCSIPublishUnpublishRace(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "sidecar")
	p := startCSI(t)
	kubelet := t.TempDir()
	fds := func() int {
		ents, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "fd"))
		return len(ents)
	}
	before := fds()
	var targets []string
	for _, mode := range []string{"sidecar", "node"} {
		attrs := map[string]string{}
		for k, v := range vol.attrs {
			attrs[k] = v
		}
		attrs["mode"] = mode
		target, _ := podTarget(t, kubelet, "pod-race-"+mode, "data")
		targets = append(targets, target)
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 5; j++ {
					var err error
					if (i+j)%2 == 0 {
						err = p.publish(publishReq("vol-race", target, attrs, vol.secrets))
					} else {
						err = p.unpublish("vol-race", target)
					}
					if err != nil && status.Code(err) != codes.Aborted {
						t.Errorf("%s mode: %v (want success or Aborted)", mode, err)
					}
				}
			}()
		}
		wg.Wait()
		if err := p.unpublish("vol-race", target); err != nil {
			t.Fatalf("%s mode: final NodeUnpublishVolume: %v", mode, err)
		}
	}
	for _, target := range targets {
		pod := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(target))))
		if m := csiMountsUnder(pod); len(m) != 0 {
			t.Errorf("still mounted after the last unpublish: %v", m)
		}
		if socks, _ := filepath.Glob(filepath.Join(pod, "volumes", "kubernetes.io~empty-dir", "*", "*", "socket")); len(socks) != 0 {
			t.Errorf("hand-off sockets left: %v", socks)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for fds() > before && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("plugin descriptors: %d before, %d after", before, fds())
	if after := fds(); after > before {
		t.Errorf("the plugin holds %d descriptors, %d before the races", after, before)
	}
}

// TestCSISecretsStayOutOfLogs: a volume's secret reaches the mount as its
// environment (or a 0600 file), never its command line, which any user
// on the node reads in /proc/PID/cmdline, nor a log or a file of the
// plugin's state another user can read.
func TestCSISecretsStayOutOfLogs(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "node")
	secret := vol.secrets["AWS_SECRET_ACCESS_KEY"]
	p := startCSI(t)
	kubelet := t.TempDir()
	target, _ := podTarget(t, kubelet, "pod-secret-logs", "data")
	if err := p.publish(publishReq("vol-secret-logs", target, vol.attrs, vol.secrets)); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	tree(t, target)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		if b, err := os.ReadFile(c); err == nil && strings.Contains(string(b), secret) {
			t.Errorf("%s holds the secret: %q", c, b)
		}
	}
	err := filepath.Walk(p.dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return nil // gone meanwhile, or not a file
		}
		if strings.HasPrefix(path, filepath.Join(p.dir, "cache")+"/") {
			return nil // cached bucket bytes
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), secret) {
			t.Errorf("%s (mode %v) holds the secret", path, info.Mode().Perm())
		}
		if err == nil && info.Mode().Perm()&0o044 != 0 && strings.Contains(path, "creds") {
			t.Errorf("%s is readable by others (mode %v)", path, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.unpublish("vol-secret-logs", target); err != nil {
		t.Fatal(err)
	}
}
