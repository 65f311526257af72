package csi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Backing files for a sidecar's passthrough.
//
// FUSE passthrough needs each cache file registered with the kernel by a
// process with CAP_SYS_ADMIN (the FUSE_DEV_IOC_BACKING_OPEN ioctl on the
// connection's /dev/fuse descriptor), which the sidecar does not have.
// When the plugin offers it (Handoff.Backing), it keeps its copy of the
// descriptor after "ready" and registers files for the sidecar on the
// same connection: the sidecar sends "backing-open" with the open cache
// file as SCM_RIGHTS and gets the id back, and "backing-close" with the
// id to release it. The plugin registers only what the sidecar could
// read and write itself (checkBackingFile), because the kernel opens a
// backing file with the credentials of whoever registered it. When the
// sidecar's connection closes (it exited or died), the plugin closes its
// copy of the descriptor, so the mount fails fast (ENOTCONN) as before.

// Backing operations (Control.Op).
const (
	OpBackingOpen  = "backing-open"
	OpBackingClose = "backing-close"
	OpBackingDone  = "backing" // the plugin's answer to either
)

// The ioctls on /dev/fuse (include/uapi/linux/fuse.h):
// _IOW(229, 1, struct fuse_backing_map) and _IOW(229, 2, uint32_t).
const (
	iocBackingOpen  = 0x4010e501
	iocBackingClose = 0x4004e502
)

// backingMap is struct fuse_backing_map.
type backingMap struct {
	Fd      int32
	Flags   uint32
	Padding uint64
}

// checkBackingFile refuses a descriptor the sidecar's user could not use
// with its own credentials: the kernel later opens it with the plugin's.
// A regular file with one link, owned by the peer's uid, is what Strata's
// cache files are; anything else is refused with EPERM.
func checkBackingFile(fd int, uid uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("csi: backing file: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("csi: backing file is not a regular file: %w", unix.EPERM)
	case st.Nlink != 1:
		return fmt.Errorf("csi: backing file has %d links: %w", st.Nlink, unix.EPERM)
	case st.Uid != uid:
		return fmt.Errorf("csi: backing file is owned by uid %d, the sidecar runs as %d: %w", st.Uid, uid, unix.EPERM)
	}
	return nil
}

func backingOpen(dev, fd int) (int32, syscall.Errno) {
	m := backingMap{Fd: int32(fd)}
	id, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(dev), iocBackingOpen, uintptr(unsafe.Pointer(&m)))
	return int32(id), errno
}

func backingClose(dev int, id int32) syscall.Errno {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(dev), iocBackingClose, uintptr(unsafe.Pointer(&id)))
	return errno
}

// peerUID is the uid of the process at the other end of c.
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}

// backingPeer is the sidecar's end of a volume's connection as the
// plugin serves it: dev is the plugin's copy of the /dev/fuse descriptor.
type backingPeer struct {
	c   *net.UnixConn
	dev *os.File
	uid uint32 // the sidecar's; ^0 (no file) if unknown
	log interface{ Warn(string, ...any) }
}

func newBackingPeer(c *net.UnixConn, dev *os.File, log interface{ Warn(string, ...any) }) *backingPeer {
	uid, err := peerUID(c)
	if err != nil {
		log.Warn("csi: cannot tell who the sidecar runs as; no backing files", "err", err)
		uid = ^uint32(0)
	}
	return &backingPeer{c: c, dev: dev, uid: uid, log: log}
}

// next answers backing requests until another message arrives (the
// sidecar's "ready" or "error") and returns it.
func (b *backingPeer) next() (Control, error) {
	buf, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, flags, _, err := b.c.ReadMsgUnix(buf, oob)
		if err != nil {
			return Control{}, fmt.Errorf("csi: receive control: %w", err)
		}
		if n == 0 {
			return Control{}, fmt.Errorf("csi: receive control: %w", net.ErrClosed)
		}
		fds, ferr := parseRights(oob[:oobn])
		var m Control
		jerr := json.Unmarshal(buf[:n], &m)
		if jerr == nil && m.Op != OpBackingOpen && m.Op != OpBackingClose {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return m, nil
		}
		reply := Control{Op: OpBackingDone, Seq: m.Seq}
		if ferr != nil || jerr != nil || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			reply.Errno = int(unix.EINVAL)
		} else {
			reply.ID, reply.Errno = answerBacking(m, fds, int(b.dev.Fd()), b.uid)
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err := SendControl(b.c, reply); err != nil {
			return Control{}, err
		}
	}
}

// serve answers backing requests until the connection fails or closes
// (the sidecar exited or died, or the volume was unpublished), then
// closes the plugin's copy of the descriptor.
func (b *backingPeer) serve() {
	defer b.dev.Close()
	for {
		if _, err := b.next(); err != nil {
			return
		}
	}
}

func answerBacking(m Control, fds []int, dev int, uid uint32) (int32, int) {
	switch m.Op {
	case OpBackingOpen:
		if len(fds) != 1 {
			return 0, int(unix.EINVAL)
		}
		if err := checkBackingFile(fds[0], uid); err != nil {
			var errno syscall.Errno
			if errors.As(err, &errno) {
				return 0, int(errno)
			}
			return 0, int(unix.EPERM)
		}
		id, errno := backingOpen(dev, fds[0])
		return id, int(errno)
	case OpBackingClose:
		return 0, int(backingClose(dev, m.ID))
	}
	return 0, int(unix.EINVAL)
}
