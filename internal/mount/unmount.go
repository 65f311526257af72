package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// Unmount unmounts e (flags: 0 or MNT_DETACH). A user who is not root
// may not call umount(2); fusermount3 -u unmounts a FUSE mount that user
// made, as umount(8) does for them.
func Unmount(e Entry, flags int) error {
	err := unix.Unmount(e.Mountpoint, flags)
	if !errors.Is(err, unix.EPERM) || os.Geteuid() == 0 || !IsFUSE(e.FSType) {
		return err
	}
	bin, lerr := fusermount(exec.LookPath)
	if lerr != nil {
		return fmt.Errorf("%w (as a non-root user, unmounting needs fusermount3: apt-get install fuse3)", err)
	}
	args := []string{"-u"}
	if flags&unix.MNT_DETACH != 0 {
		args = append(args, "-z")
	}
	out, ferr := exec.Command(bin, append(args, "--", e.Mountpoint)...).CombinedOutput()
	if ferr == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	if strings.Contains(msg, "busy") {
		return fmt.Errorf("%s: %w", msg, unix.EBUSY)
	}
	return fmt.Errorf("%s (%w)", msg, ferr)
}

// fusermount finds fusermount3 (or the older fusermount) as go-fuse does:
// in PATH, then in /bin.
func fusermount(lookPath func(string) (string, error)) (string, error) {
	var err error
	for _, name := range []string{"fusermount3", "fusermount"} {
		for _, p := range []string{name, "/bin/" + name} {
			var bin string
			if bin, err = lookPath(p); err == nil {
				return bin, nil
			}
		}
	}
	return "", err
}
