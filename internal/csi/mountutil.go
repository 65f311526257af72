package csi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	Dev        string // major:minor
	Root       string
	Mountpoint string
	FSType     string
	Source     string
}

// readMountinfo parses /proc/self/mountinfo.
func readMountinfo() ([]mountInfo, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("csi: read mountinfo: %w", err)
	}
	return parseMountinfo(string(b)), nil
}

func parseMountinfo(s string) []mountInfo {
	var out []mountInfo
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(f) {
			continue
		}
		out = append(out, mountInfo{
			Dev: f[2], Root: unescape(f[3]), Mountpoint: unescape(f[4]),
			FSType: f[sep+1], Source: unescape(f[sep+2]),
		})
	}
	return out
}

func unescape(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// findMount returns the topmost mount at path p, if any.
func findMount(p string) (mountInfo, bool, error) {
	all, err := readMountinfo()
	if err != nil {
		return mountInfo{}, false, err
	}
	p = filepath.Clean(p)
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Mountpoint == p {
			return all[i], true, nil
		}
	}
	return mountInfo{}, false, nil
}

// isMounted reports whether something is mounted at p.
func isMounted(p string) (bool, error) {
	_, ok, err := findMount(p)
	return ok, err
}

// healthy reports whether the mount at p answers a stat (a FUSE mount
// whose daemon died answers ENOTCONN).
func healthy(p string) bool {
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil
}

// fuseMountData is the option string of a FUSE mount served through fd.
func fuseMountData(fd int, readOnly bool) string {
	opts := []string{"fd=" + strconv.Itoa(fd), "rootmode=40000", "user_id=0", "group_id=0",
		"allow_other", "default_permissions", "max_read=1048576"}
	if readOnly {
		opts = append(opts, "ro")
	}
	return strings.Join(opts, ",")
}

// mountFUSE opens /dev/fuse and mounts target on it. The returned file
// is the only reference to the connection until it is handed over.
func mountFUSE(target, fsName string, readOnly bool) (*os.File, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("csi: open /dev/fuse: %w", err)
	}
	dev := os.NewFile(uintptr(fd), "/dev/fuse")
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if err := unix.Mount(fsName, target, "fuse.strata", flags, fuseMountData(fd, readOnly)); err != nil {
		dev.Close()
		return nil, fmt.Errorf("csi: mount fuse on %s: %w", target, err)
	}
	return dev, nil
}

// setReadAhead raises the kernel readahead of the mount at target; the
// unprivileged sidecar cannot write sysfs, so the plugin does it.
func setReadAhead(target string, kb int) error {
	m, ok, err := findMount(target)
	if err != nil || !ok {
		return fmt.Errorf("csi: read_ahead_kb: %s not mounted (%w)", target, err)
	}
	p := filepath.Join("/sys/class/bdi", m.Dev, "read_ahead_kb")
	if err := os.WriteFile(p, []byte(strconv.Itoa(kb)), 0o644); err != nil {
		return fmt.Errorf("csi: read_ahead_kb: %w", err)
	}
	return nil
}

// bindMount bind-mounts src on target, read-only if asked.
func bindMount(src, target string, readOnly bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("csi: bind %s on %s: %w", src, target, err)
	}
	if readOnly {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
		if err := unix.Mount("", target, "", flags, ""); err != nil {
			if uerr := unix.Unmount(target, unix.MNT_DETACH); uerr != nil {
				return fmt.Errorf("csi: remount %s read-only: %w (and the writable bind stays: %v)", target, err, uerr)
			}
			return fmt.Errorf("csi: remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// unmountAll unmounts every mount stacked at p; when one stays busy it
// detaches it lazily so the kernel finishes with open files.
func unmountAll(p string) error {
	for i := 0; i < 8; i++ {
		ok, err := isMounted(p)
		if err != nil || !ok {
			return err
		}
		err = unix.Unmount(p, 0)
		if errors.Is(err, unix.EBUSY) {
			time.Sleep(100 * time.Millisecond)
			err = unix.Unmount(p, 0)
			if errors.Is(err, unix.EBUSY) {
				err = unix.Unmount(p, unix.MNT_DETACH)
			}
		}
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("csi: unmount %s: %w", p, err)
		}
	}
	return fmt.Errorf("csi: unmount %s: still mounted after 8 unmounts", p)
}

// removeTarget deletes the (unmounted) target directory, as CSI asks of
// NodeUnpublishVolume; a missing one is fine.
func removeTarget(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("csi: remove target %s: %w", p, err)
	}
	return nil
}
