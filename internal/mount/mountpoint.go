package mount

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// CheckMountpoint rejects a mountpoint that is missing, not a directory,
// or already mounted (including the dead mount a crashed process leaves).
func CheckMountpoint(p string) error {
	if strings.HasPrefix(p, "/dev/fd/") {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		if errors.Is(err, unix.ENOTCONN) {
			return fmt.Errorf("mountpoint %s: a previous mount died there (transport endpoint is not connected); run `umount %s` first", p, p)
		}
		return fmt.Errorf("mountpoint %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("mountpoint %s: not a directory", p)
	}
	if IsMountpoint(p) {
		return fmt.Errorf("mountpoint %s is busy: something is already mounted there", p)
	}
	return nil
}

// IsMountpoint reports whether p is the root of a mount.
func IsMountpoint(p string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && UnescapeMountinfo(f[4]) == p {
			return true
		}
	}
	return false
}

func UnescapeMountinfo(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
