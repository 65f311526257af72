package mount

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
)

type fakeDevInfo struct{ mode fs.FileMode }

func (i fakeDevInfo) Name() string       { return "fuse" }
func (i fakeDevInfo) Size() int64        { return 0 }
func (i fakeDevInfo) Mode() fs.FileMode  { return i.mode }
func (i fakeDevInfo) ModTime() time.Time { return time.Time{} }
func (i fakeDevInfo) IsDir() bool        { return false }
func (i fakeDevInfo) Sys() any           { return nil }

// TestCheckFUSESaysWhatIsMissing: a mount that cannot work says why, in
// the words of the fix, before anything is made; before, a non-root
// user read only "fusermount exited with code 256" (fusermount3's own
// message went to the background daemon's stderr).
func TestCheckFUSESaysWhatIsMissing(t *testing.T) {
	host := func(euid int, devErr error, fusermount bool, conf string) fuseHost {
		return fuseHost{
			euid: euid,
			open: func(string) error { return devErr },
			stat: func(string) (fs.FileInfo, error) { return fakeDevInfo{fs.ModeDevice | fs.ModeCharDevice | 0o600}, nil },
			lookPath: func(name string) (string, error) {
				if fusermount {
					return "/usr/bin/" + name, nil
				}
				return "", errors.New("not found")
			},
			fuseConf: func() ([]byte, error) {
				if conf == "" {
					return nil, os.ErrNotExist
				}
				return []byte(conf), nil
			},
		}
	}
	for _, c := range []struct {
		name       string
		h          fuseHost
		mnt        string
		allowOther bool
		want       string // "" for no error
	}{
		{"root", host(0, nil, false, ""), "/mnt/data", true, ""},
		{"root, no device", host(0, os.ErrNotExist, true, ""), "/mnt/data", false, "no /dev/fuse"},
		{"user", host(1000, nil, true, ""), "/mnt/data", false, ""},
		{"user, device 0600", host(1000, os.ErrPermission, true, ""), "/mnt/data", false, "cannot open /dev/fuse as a non-root user (its mode is 0600)"},
		{"user, no fusermount3", host(1000, nil, false, ""), "/mnt/data", false, "needs fusermount3"},
		{"user, allow-other, no fuse.conf", host(1000, nil, true, ""), "/mnt/data", true, "needs the line `user_allow_other` in /etc/fuse.conf"},
		{"user, allow-other, commented out", host(1000, nil, true, "# mount_max = 1000\n#user_allow_other\n"), "/mnt/data", true, "user_allow_other"},
		{"user, allow-other, enabled", host(1000, nil, true, "# comment\n  user_allow_other  \n"), "/mnt/data", true, ""},
		{"handed-over descriptor", host(1000, os.ErrNotExist, false, ""), "/dev/fd/3", true, ""},
	} {
		err := checkFUSE(c.h, c.mnt, c.allowOther)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
