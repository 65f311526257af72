package main

import (
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/mount"
)

// TestNotALiveMountSaysWhatToType: a command given a path inside a Strata
// mount, or a directory that is no mount, says so and what to type; the
// mountpoint of a Strata mount leaves the caller's own error.
func TestNotALiveMountSaysWhatToType(t *testing.T) {
	ms := []mount.Entry{
		{Mountpoint: "/", FSType: "ext4"},
		{Mountpoint: "/mnt/data", FSType: "fuse.strata"},
		{Mountpoint: "/mnt/data/sub", FSType: "tmpfs"},
		{Mountpoint: "/mnt/ssh", FSType: "fuse.sshfs"},
		{Mountpoint: "/srv", FSType: "xfs"},
	}
	stat := func(p string) (os.FileInfo, error) {
		if p == "/tmp/gone" {
			return nil, fs.ErrNotExist
		}
		if strings.HasPrefix(p, "/mnt/data/train") || strings.HasPrefix(p, "/mnt/ssh/") {
			t.Errorf("stat(%q): a path inside a FUSE mount was stat'ed", p)
		}
		return nil, nil
	}
	example := func(mnt, rel string) string { return "strata refresh " + mnt + " " + rel }
	for _, c := range []struct{ path, want string }{
		{"/mnt/data", ""},
		{"/mnt/data/train/shard-1.tar", "/mnt/data/train/shard-1.tar is a path inside the Strata mount at /mnt/data, not its mountpoint: try `strata refresh /mnt/data train/shard-1.tar`"},
		{"/mnt/data/sub/x", "is not mounted"},
		{"/mnt/data/sub", "is not a Strata mount (it is tmpfs)"},
		{"/mnt/ssh/x", "is not mounted"},
		{"/srv", "is not a Strata mount (it is xfs)"},
		{"/tmp/gone", "/tmp/gone: no such file or directory"},
		{"/tmp", "/tmp is not mounted: give the mountpoint of a live Strata mount"},
	} {
		err := explainNotAMount(c.path, example, ms, stat)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
	}
}
