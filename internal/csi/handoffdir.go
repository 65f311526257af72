package csi

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// handoffDir is a volume's hand-off directory, <pod's emptyDir>/<volume>,
// held open. The pod's containers write that emptyDir, so a tenant can
// put a symlink (or swap one in later) where the directory goes, pointing
// anywhere on the node; the plugin runs as root and would then chmod
// 0777, empty and listen in the directory it points to (a node's private
// directory, another pod's hand-off). So the directory is opened once,
// without following a link in its last component (the only one the pod
// writes: the emptyDir itself and everything above it are kubelet's),
// and every later change goes through that descriptor.
type handoffDir struct {
	f    *os.File
	path string // for messages
}

// errHandoffDir is a hand-off directory the plugin refuses to use.
var errHandoffDir = errors.New("csi: hand-off directory is not a directory")

// openHandoffDir creates (if need be) and opens path, refusing a symlink
// or anything else that is not a directory in its last component.
func openHandoffDir(path string) (*handoffDir, error) {
	parent, name := filepath.Split(filepath.Clean(path))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("csi: hand-off dir: %w", err)
	}
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("csi: hand-off dir: open %s: %w", parent, err)
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("csi: hand-off dir: mkdir %s: %w", path, err)
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%w: %s is a symlink or a file (something in the pod put it there): %w", errHandoffDir, path, err)
		}
		return nil, fmt.Errorf("csi: hand-off dir: open %s: %w", path, err)
	}
	return &handoffDir{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// procPath names name inside the directory through the plugin's
// descriptor (short enough for a sockaddr, and not resolved again
// through the pod's emptyDir).
func (h *handoffDir) procPath(name string) string {
	return "/proc/self/fd/" + strconv.Itoa(int(h.f.Fd())) + "/" + name
}

// chmodDir makes the directory writable by the sidecar, whatever its uid.
func (h *handoffDir) chmodDir(mode os.FileMode) error {
	if err := h.f.Chmod(mode); err != nil {
		return fmt.Errorf("csi: chmod %s: %w", h.path, err)
	}
	return nil
}

// remove unlinks name in the directory (never through a symlink); a
// missing one is fine.
func (h *handoffDir) remove(name string) error {
	if err := unix.Unlinkat(int(h.f.Fd()), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("csi: remove %s: %w", filepath.Join(h.path, name), err)
	}
	return nil
}

// listen listens on the directory's socket (replacing a stale one),
// readable and writable by any user in the pod, since the sidecar may
// run as any.
func (h *handoffDir) listen() (*net.UnixListener, error) {
	if err := h.remove(SocketName); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: h.procPath(SocketName), Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("csi: listen %s: %w", filepath.Join(h.path, SocketName), err)
	}
	l.SetUnlinkOnClose(false)
	if err := h.chmodSocket(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// chmodSocket makes the socket connectable by any uid. chmod(2) follows
// symlinks and the pod may have swapped one in since the bind, so the
// socket is opened O_PATH|O_NOFOLLOW, checked to be a socket, and changed
// through that descriptor.
func (h *handoffDir) chmodSocket() error {
	fd, err := unix.Openat(int(h.f.Fd()), SocketName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("csi: chmod %s: %w", filepath.Join(h.path, SocketName), err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("csi: chmod %s: %w", filepath.Join(h.path, SocketName), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%w: %s was replaced after the plugin bound it", errHandoffDir, filepath.Join(h.path, SocketName))
	}
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o666); err != nil {
		return fmt.Errorf("csi: chmod %s: %w", filepath.Join(h.path, SocketName), err)
	}
	return nil
}

func (h *handoffDir) Close() error { return h.f.Close() }
