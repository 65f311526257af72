package mount

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
)

// What a mount needs from the machine before it can ask the kernel for a
// FUSE filesystem, checked before anything is made: as a non-root user,
// go-fuse mounts through the fusermount3 helper, whose own message ("failed
// to open /dev/fuse: Permission denied", "option allow_other only allowed
// if 'user_allow_other' is set in /etc/fuse.conf") goes to the daemon's
// stderr, which a background mount does not show: the user read only
// "fusermount exited with code 256".

// fuseHost is how checkFUSE sees the machine (tests give their own).
type fuseHost struct {
	euid     int
	open     func(path string) error // opens path read-write, then closes it
	stat     func(path string) (fs.FileInfo, error)
	lookPath func(name string) (string, error)
	fuseConf func() ([]byte, error) // /etc/fuse.conf
}

// thisHost is the machine the process runs on.
func thisHost() fuseHost {
	return fuseHost{
		euid: os.Geteuid(),
		open: func(p string) error {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			return f.Close()
		},
		stat:     os.Stat,
		lookPath: exec.LookPath,
		fuseConf: func() ([]byte, error) { return os.ReadFile("/etc/fuse.conf") },
	}
}

// CheckFUSE says why this machine cannot mount a FUSE filesystem at mnt
// for this user (and with --allow-other), or nil.
func CheckFUSE(mnt string, allowOther bool) error {
	return checkFUSE(thisHost(), mnt, allowOther)
}

// checkFUSE says why mounting at mnt cannot work on host h, or nil.
// A /dev/fd/N mountpoint is a descriptor the CSI plugin opened: nothing to
// check.
func checkFUSE(h fuseHost, mnt string, allowOther bool) error {
	if strings.HasPrefix(mnt, "/dev/fd/") {
		return nil
	}
	err := h.open("/dev/fuse")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("this machine has no /dev/fuse: load the FUSE module (`modprobe fuse`); in a container, pass the device (`docker run --device /dev/fuse --cap-add SYS_ADMIN ...`)")
	case errors.Is(err, fs.ErrPermission) && h.euid != 0:
		mode := ""
		if fi, err := h.stat("/dev/fuse"); err == nil {
			mode = fmt.Sprintf(" (its mode is %#o)", fi.Mode().Perm())
		}
		return fmt.Errorf("cannot open /dev/fuse as a non-root user%s: fusermount3 opens it with your rights. Most distributions make it 0666 (`chmod 0666 /dev/fuse`, or a udev rule); or mount as root", mode)
	case err != nil:
		return fmt.Errorf("cannot open /dev/fuse: %w", err)
	}
	if h.euid == 0 {
		return nil // root mounts directly, without fusermount3
	}
	if _, err := fusermount(h.lookPath); err != nil {
		return errors.New("mounting as a non-root user needs fusermount3, which is not installed (Debian and Ubuntu: `apt-get install fuse3`); or mount as root")
	}
	if allowOther {
		conf, _ := h.fuseConf()
		if !allowsOther(conf) {
			return errors.New("--allow-other as a non-root user needs the line `user_allow_other` in /etc/fuse.conf (fusermount3 refuses the option otherwise); add it, or mount as root")
		}
	}
	return nil
}

// allowsOther reports whether fuse.conf (its content) enables
// user_allow_other: the option alone on a line, not commented out.
func allowsOther(conf []byte) bool {
	s := bufio.NewScanner(bytes.NewReader(conf))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "user_allow_other" {
			return true
		}
	}
	return false
}
