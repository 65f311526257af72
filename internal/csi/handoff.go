package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// The hand-off protocol between the node plugin and `strata sidecar`.
//
// The plugin listens on <handoff dir>/<volume>/socket, a SOCK_SEQPACKET
// unix socket (message boundaries kept, so every message is one JSON
// document). The sidecar connects; the plugin sends one Handoff message
// carrying the /dev/fuse descriptor as SCM_RIGHTS; the sidecar answers one
// Control message, "ready" once it serves the mount or "error" if it could
// not start. After "ready" the plugin closes its own copy of the
// descriptor and the listener; after "error" it keeps both, so a restarted
// sidecar can try again. Later, NodeUnpublishVolume unmounts the target and
// sends "exit" on the same connection. The sidecar also writes
// <volume>/ready (or <volume>/error) for probes and people.

// Names inside a volume's hand-off directory.
const (
	SocketName = "socket"
	ReadyName  = "ready"
	ErrorName  = "error"
)

// HandoffVersion is the protocol version; a sidecar refuses others.
const HandoffVersion = 1

// Control operations.
const (
	OpReady = "ready"
	OpError = "error"
	OpExit  = "exit"
)

const maxMessage = 1 << 20

var errProtocol = errors.New("csi: hand-off protocol error")

// Handoff is what the sidecar needs to serve a volume.
type Handoff struct {
	Version    int               `json:"version"`
	VolumeID   string            `json:"volumeID"`
	VolumeName string            `json:"volumeName"`
	Source     string            `json:"source"`
	Args       []string          `json:"args"`
	CacheDir   string            `json:"cacheDir,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Files      map[string][]byte `json:"files,omitempty"`
	// Backing: the plugin registers passthrough backing files for the
	// sidecar on this connection after "ready" (backing.go).
	Backing bool `json:"backing,omitempty"`
}

// LogValue keeps credentials out of logs.
func (h Handoff) LogValue() slog.Value {
	return slog.GroupValue(slog.String("volume", h.VolumeID), slog.String("source", h.Source),
		slog.Any("args", h.Args), slog.Int("secret_keys", len(h.Env)+len(h.Files)))
}

// Control is a status or command after the hand-off.
type Control struct {
	Op    string `json:"op"`
	Error string `json:"error,omitempty"`
	// Backing requests and answers (backing.go): Seq pairs an answer with
	// its request, ID is a backing id, Errno the ioctl's error.
	Seq   uint64 `json:"seq,omitempty"`
	ID    int32  `json:"id,omitempty"`
	Errno int    `json:"errno,omitempty"`
}

// shortDir returns a path for dir usable in a sockaddr (108 bytes,
// about 104 portable): dir itself when short, else /proc/self/fd/N of an
// O_PATH descriptor, which the caller closes once bound or connected.
func shortDir(dir string) (string, func(), error) {
	if len(dir)+len(SocketName)+2 < 100 {
		return dir, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("csi: open %s: %w", dir, err)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), func() { unix.Close(fd) }, nil
}

// ListenHandoff listens on dir/socket (replacing a stale one), readable
// and writable by any user in the pod, since the sidecar may run as any.
// dir must be a directory, not a symlink (handoffdir.go).
func ListenHandoff(dir string) (*net.UnixListener, error) {
	h, err := openHandoffDir(dir)
	if err != nil {
		return nil, err
	}
	defer h.Close() // the bound socket does not need the descriptor
	return h.listen()
}

// DialHandoff connects to dir/socket.
func DialHandoff(ctx context.Context, dir string) (*net.UnixConn, error) {
	short, done, err := shortDir(dir)
	if err != nil {
		return nil, err
	}
	defer done()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unixpacket", filepath.Join(short, SocketName))
	if err != nil {
		return nil, fmt.Errorf("csi: dial %s: %w", filepath.Join(dir, SocketName), err)
	}
	return c.(*net.UnixConn), nil
}

// SendHandoff sends h with the descriptor dev.
func SendHandoff(c *net.UnixConn, h Handoff, dev *os.File) error {
	h.Version = HandoffVersion
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("csi: encode hand-off: %w", err)
	}
	if len(b) > maxMessage {
		return fmt.Errorf("%w: hand-off of %d bytes", errProtocol, len(b))
	}
	if _, _, err := c.WriteMsgUnix(b, unix.UnixRights(int(dev.Fd())), nil); err != nil {
		return fmt.Errorf("csi: send hand-off: %w", err)
	}
	return nil
}

// RecvHandoff receives a hand-off and its descriptor.
func RecvHandoff(c *net.UnixConn) (Handoff, *os.File, error) {
	var h Handoff
	buf, oob := make([]byte, maxMessage), make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return h, nil, fmt.Errorf("csi: receive hand-off: %w", err)
	}
	fds, ferr := parseRights(oob[:oobn])
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	switch {
	case ferr != nil:
		closeAll()
		return h, nil, ferr
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		closeAll()
		return h, nil, fmt.Errorf("%w: truncated message", errProtocol)
	case len(fds) != 1:
		closeAll()
		return h, nil, fmt.Errorf("%w: want one descriptor, got %d", errProtocol, len(fds))
	}
	if err := json.Unmarshal(buf[:n], &h); err != nil {
		closeAll()
		return h, nil, fmt.Errorf("%w: %w", errProtocol, err)
	}
	if h.Version != HandoffVersion {
		closeAll()
		return h, nil, fmt.Errorf("%w: version %d, this sidecar speaks %d (upgrade the sidecar image with the driver)", errProtocol, h.Version, HandoffVersion)
	}
	return h, os.NewFile(uintptr(fds[0]), "/dev/fuse"), nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errProtocol, err)
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// SendControl sends one control message.
func SendControl(c *net.UnixConn, m Control) error {
	b, _ := json.Marshal(m)
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("csi: send %s: %w", m.Op, err)
	}
	return nil
}

// RecvControl waits for one control message.
func RecvControl(c *net.UnixConn) (Control, error) {
	var m Control
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil {
		return m, fmt.Errorf("csi: receive control: %w", err)
	}
	if n == 0 {
		return m, fmt.Errorf("csi: receive control: %w", net.ErrClosed)
	}
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return m, fmt.Errorf("%w: %w", errProtocol, err)
	}
	return m, nil
}
