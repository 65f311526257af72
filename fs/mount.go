package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
)

// MountOptions are the kernel-facing settings of a mount.
type MountOptions struct {
	AllowOther bool
	ReadOnly   bool
	// MaxRead is the largest READ the kernel sends (capped by
	// /proc/sys/fs/fuse/max_pages_limit; 1 MiB by default there).
	MaxRead int
	// MaxBackground bounds the kernel's async requests (readahead).
	MaxBackground int
	// ReadAheadKB is written to the mount's bdi read_ahead_kb after mount
	// (0 leaves the kernel's 128 KiB).
	ReadAheadKB int
	// ProbeDir is a directory on the cache filesystem, used to prove that
	// passthrough works there before any file is handed to the kernel.
	ProbeDir string
	FsName   string
	Debug    bool
	// Backing registers passthrough backing files when the daemon may not
	// (a sidecar without CAP_SYS_ADMIN); nil registers them directly.
	Backing Backing
}

// Mounted is a live mount.
type Mounted struct {
	Server *fuse.Server
	// Passthrough reports whether the probe succeeded; Why says why not.
	Passthrough bool
	Why         string

	backing *reusedBacking
}

// Close returns what the mount kept for reuse (backing registrations'
// descriptors); call it once the server has stopped.
func (m *Mounted) Close() { m.backing.Close() }

// KeepRegistered registers a fully cached small file's cache file with
// the kernel before its first open and keeps the registration, as the
// last release of an open does: a restarted mount's first epoch then
// opens its recent files as a warm epoch does, without a registration
// each (for a CSI sidecar, a round trip to the node plugin each). Files
// that would not be kept after a release (not verified, over 8 MiB) are
// left alone. It reports whether the file is kept registered.
func (m *Mounted) KeepRegistered(o *cache.Object) bool {
	if !m.Passthrough || o.Size() == 0 || o.Size() > idleBackingSize || !o.Verified() {
		return false
	}
	fd, err := o.Fd()
	if err != nil || !o.Verified() { // this run's first open of a short file drops blocks
		return false
	}
	return m.backing.keep(fd)
}

// Mount mounts fsys at mountpoint ("/dev/fd/N" serves an already-open
// /dev/fuse descriptor, as in the Kubernetes sidecar mode) and returns
// once the kernel has the filesystem.
func Mount(mountpoint string, fsys *FS, mo MountOptions) (*Mounted, error) {
	fdMount := strings.HasPrefix(mountpoint, "/dev/fd/")
	timeout := fsys.timeout()
	neg := timeout
	opts := &gofs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &neg,
		UID:             fsys.opts.UID,
		GID:             fsys.opts.GID,
		MountOptions: fuse.MountOptions{
			AllowOther:          mo.AllowOther,
			MaxWrite:            mo.MaxRead,
			MaxBackground:       mo.MaxBackground,
			CongestionThreshold: mo.MaxBackground * 3 / 4,
			FsName:              mo.FsName,
			Name:                "strata",
			DisableSplice:       true, // we return bytes, not fds: splice would only add a pipe copy
			DirectMount:         !fdMount && os.Geteuid() == 0,
			Debug:               mo.Debug,
			// open(O_TRUNC) arrives as one OPEN carrying O_TRUNC instead
			// of an OPEN and a SETATTR after it: a truncating rewrite is
			// known when its handle is chosen, so it can be written by
			// passthrough like a new file (Open, openRewrite).
			ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
		},
	}
	// The kernel checks every access against the owner and modes the
	// mount maps objects to (--uid, --gid, --file-mode, --dir-mode): with
	// allow_other, another user gets what the modes say, no more.
	opts.MountOptions.Options = append(opts.MountOptions.Options, "default_permissions")
	if mo.ReadOnly {
		opts.MountOptions.Options = append(opts.MountOptions.Options, "ro")
	}
	if !fsys.opts.Passthrough {
		opts.MountOptions.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	}
	srv, reuse, err := mountServer(mountpoint, fsys.Root(), opts, mo.Backing, fsys.holds)
	if err != nil {
		if strings.Contains(err.Error(), "fusermount exited") {
			// go-fuse's words: fusermount3's own message went to stderr,
			// which a background mount does not show.
			return nil, fmt.Errorf("fs: mount %s: %s (fusermount3 refused; `strata mount --foreground` shows its message)", mountpoint, strings.TrimSpace(err.Error()))
		}
		return nil, fmt.Errorf("fs: mount %s: %w", mountpoint, err)
	}
	if !fdMount {
		fsys.mountpoint.Store(&mountpoint)
	}
	m := &Mounted{Server: srv, backing: reuse}
	if fsys.opts.Passthrough {
		m.Passthrough, m.Why = probePassthrough(srv, reuse.inner, mo.ProbeDir)
		fsys.passthrough.Store(m.Passthrough)
	} else {
		m.Why = "disabled by --passthrough=off"
	}
	if mo.ReadAheadKB > 0 && !fdMount {
		if err := setReadAhead(mountpoint, mo.ReadAheadKB); err != nil {
			fsys.log.Debug("fs: could not raise read_ahead_kb", "err", err)
		}
	}
	return m, nil
}

// probePassthrough registers a backing file on the cache filesystem once.
// go-fuse turns passthrough off for the whole mount after one failed
// registration, silently; probing first lets us say why and route every
// open through userspace instead.
func probePassthrough(srv *fuse.Server, b Backing, dir string) (bool, string) {
	if srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return false, "kernel does not offer FUSE passthrough (Linux 6.9+ with CONFIG_FUSE_PASSTHROUGH)"
	}
	f, err := os.CreateTemp(dir, ".passthrough-probe-*")
	if err != nil {
		return false, fmt.Sprintf("cannot create a probe file in %s: %v", dir, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	id, errno := b.Register(int(f.Fd()))
	if errno != 0 {
		why := errno.Error()
		switch errno {
		case unix.EPERM:
			why = "needs CAP_SYS_ADMIN in the initial user namespace (run as root; in a Kubernetes sidecar the CSI plugin registers files the sidecar's user owns)"
		case unix.ELOOP:
			why = "the cache directory is on a stacked filesystem (overlayfs); put it on ext4/xfs"
		}
		return false, why
	}
	// The probe answered; a mapping left registered pins only the probe
	// file, until the mount ends.
	_ = b.Unregister(id)
	return true, ""
}

// setReadAhead raises the kernel readahead of the mount's backing device
// info: FUSE offers 128 KiB, which splits sequential reads into many small
// requests.
func setReadAhead(mountpoint string, kb int) error {
	var st unix.Stat_t
	var err error
	for range 50 { // the mount may take a moment to show up
		if err = unix.Stat(mountpoint, &st); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	p := filepath.Join("/sys/class/bdi", fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), "read_ahead_kb")
	return os.WriteFile(p, []byte(strconv.Itoa(kb)), 0)
}
