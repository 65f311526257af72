package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// MountSpec is what every mounter needs: a bucket (and prefix) on a
// server, a cache directory and a mount point.
type MountSpec struct {
	// Scheme is "s3" (default) or "gs".
	Scheme string
	Bucket string
	Prefix string // optional, without slashes at the ends
	// Endpoint is the server URL the mount talks to (for gs: the
	// fake-gcs-server URL, passed as STORAGE_EMULATOR_HOST).
	Endpoint             string
	Region               string
	AccessKey, SecretKey string
	CacheDir             string
	Mountpoint           string
	// LogPath receives the daemon's output.
	LogPath string
	// Writable mounts read-write (write benchmarks); by default every
	// client mounts read-only.
	Writable bool
	// Extra flags appended to the mounter's own.
	Extra []string
}

// Source is the URL form of the spec's bucket and prefix: "s3://b/p".
func (s MountSpec) Source() string {
	scheme := s.Scheme
	if scheme == "" {
		scheme = "s3"
	}
	src := scheme + "://" + s.Bucket
	if p := trimSlashes(s.Prefix); p != "" {
		src += "/" + p
	}
	return src
}

func (s MountSpec) hostPort() string {
	return strings.TrimPrefix(strings.TrimPrefix(s.Endpoint, "http://"), "https://")
}

// Mounter mounts a bucket with one FUSE client (strata, rclone, s3fs).
type Mounter interface {
	// Name is the system's short name in reports.
	Name() string
	// Available returns nil if the client can be used here, else why not.
	Available(ctx context.Context) error
	// Mount mounts and returns once the mount point serves.
	Mount(ctx context.Context, spec MountSpec) (*Mount, error)
}

// Mount is a live mount.
type Mount struct {
	// Root is the mount point.
	Root string
	// Proc is the daemon when it runs as our child (else nil).
	Proc *Proc
	// Pid is the daemon's pid when known (a self-daemonizing client).
	Pid int
	// Command is the command line that mounted it, for reports.
	Command string
	// Unmounter, if set, takes the mount down instead of umount(8) (the
	// CSI sidecar's NodeUnpublishVolume).
	Unmounter func(ctx context.Context) error
}

// Unmount unmounts and waits (up to a minute) for the daemon to exit, so
// that a following mount on the same cache dir sees everything flushed.
func (m *Mount) Unmount(ctx context.Context) error {
	var err error
	if m.Unmounter != nil {
		err = m.Unmounter(ctx)
	} else {
		err = Unmount(ctx, m.Root)
	}
	deadline := time.Now().Add(60 * time.Second)
	switch {
	case m.Proc != nil:
		if !m.Proc.Wait(time.Until(deadline)) {
			err = errors.Join(err, fmt.Errorf("workload: %s did not exit after unmount", m.Proc.Name), m.Proc.Stop(5*time.Second))
		}
	case m.Pid > 0:
		for syscall.Kill(m.Pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return err
}

// Unmount unmounts a FUSE mount point: umount(8) as root, fusermount3 -u
// otherwise; busy mounts are retried for a few seconds, then detached
// lazily.
func Unmount(ctx context.Context, mp string) error {
	if !IsMounted(mp) {
		return nil
	}
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		if last = runUnmount(ctx, mp, false); last == nil || !IsMounted(mp) {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := runUnmount(ctx, mp, true); err != nil {
		return fmt.Errorf("workload: unmount %s: %w (lazy: %v)", mp, last, err)
	}
	return nil
}

func runUnmount(ctx context.Context, mp string, lazy bool) error {
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		args := []string{mp}
		if lazy {
			args = []string{"-l", mp}
		}
		cmd = exec.CommandContext(ctx, "umount", args...)
	} else {
		flag := "-u"
		if lazy {
			flag = "-uz"
		}
		cmd = exec.CommandContext(ctx, "fusermount3", flag, mp)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// IsMounted reports whether mp is a mount point of a FUSE filesystem in
// this mount namespace.
func IsMounted(mp string) bool {
	mp, err := filepath.Abs(mp)
	if err != nil {
		return false
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts... - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != mp {
			continue
		}
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && strings.HasPrefix(fields[i+1], "fuse") {
				return true
			}
		}
	}
	return false
}

// unescapeMountinfo undoes the octal escapes (\040 for space) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// waitMounted polls until mp is a FUSE mount, the daemon exits, or the
// timeout passes.
func waitMounted(ctx context.Context, mp string, p *Proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !IsMounted(mp) {
		if p != nil {
			if done, err := p.Exited(); done {
				return fmt.Errorf("%s exited before mounting (%v):\n%s", p.Name, err, p.LogTail(2048))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not mounted after %s", mp, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// prepareMountpoint creates the mount point and cache dir.
func prepareMountpoint(spec MountSpec) error {
	if IsMounted(spec.Mountpoint) {
		return fmt.Errorf("workload: %s is already mounted", spec.Mountpoint)
	}
	for _, d := range []string{spec.Mountpoint, spec.CacheDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("workload: mount: %w", err)
		}
	}
	if spec.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
			return fmt.Errorf("workload: mount: %w", err)
		}
	}
	return nil
}
