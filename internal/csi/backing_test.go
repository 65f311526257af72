package csi

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckBackingFileRefusesWhatTheSidecarCouldNotUse: the kernel opens
// a backing file with the plugin's (root) credentials, so the plugin
// registers only regular files with one link owned by the sidecar's uid.
func TestCheckBackingFileRefusesWhatTheSidecarCouldNotUse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cached")
	if err := os.WriteFile(file, []byte("bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(p string) int {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	uid := uint32(os.Getuid())
	if err := checkBackingFile(open(file), uid); err != nil {
		t.Fatalf("a cache file of the sidecar's own: %v", err)
	}
	for name, c := range map[string]struct {
		fd  int
		uid uint32
	}{
		"another user's file": {open(file), uid + 1},
		"a directory":         {open(dir), uid},
	} {
		if err := checkBackingFile(c.fd, c.uid); !errors.Is(err, unix.EPERM) {
			t.Errorf("%s: %v, want EPERM", name, err)
		}
	}
	if err := os.Link(file, filepath.Join(dir, "second-name")); err != nil {
		t.Fatal(err)
	}
	if err := checkBackingFile(open(file), uid); !errors.Is(err, unix.EPERM) {
		t.Errorf("a file with a second link (it could be anyone's): %v, want EPERM", err)
	}
}

// TestPluginConnAsksAndHearsExit: the sidecar's side of the connection
// sends a backing request with the descriptor, gets the plugin's answer
// (refusals included) while "exit" still arrives on the same connection.
func TestPluginConnAsksAndHearsExit(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	sidecar, plugin := conn(fds[0]), conn(fds[1])
	dir := t.TempDir()
	// The plugin's "/dev/fuse" is a plain file here: the ioctl fails with
	// ENOTTY, which must come back to the sidecar as the answer.
	dev, err := os.Create(filepath.Join(dir, "not-dev-fuse"))
	if err != nil {
		t.Fatal(err)
	}
	peer := newBackingPeer(plugin, dev, discard{})
	got := make(chan Control, 1)
	go func() {
		m, err := peer.next()
		if err != nil {
			t.Error(err)
		}
		got <- m
	}()

	pc := NewPluginConn(sidecar)
	f, err := os.Create(filepath.Join(dir, "cached"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, errno := pc.Register(int(f.Fd())); errno != syscall.ENOTTY {
		t.Errorf("register on a non-FUSE descriptor: %v, want ENOTTY from the plugin's ioctl", errno)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, errno := pc.Register(int(d.Fd())); errno != syscall.EPERM {
		t.Errorf("register a directory: %v, want EPERM", errno)
	}
	if errno := pc.Unregister(7); errno != syscall.ENOTTY {
		t.Errorf("unregister: %v, want ENOTTY from the plugin's ioctl", errno)
	}
	if err := SendControl(sidecar, Control{Op: OpReady}); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Op != OpReady {
		t.Fatalf("the plugin's next message: %+v, want ready", m)
	}
	if err := SendControl(plugin, Control{Op: OpExit}); err != nil {
		t.Fatal(err)
	}
	<-pc.Exit()
}

type discard struct{}

func (discard) Warn(string, ...any) {}
