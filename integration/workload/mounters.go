package workload

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// mountTimeout bounds how long a client may take to mount.
const mountTimeout = 90 * time.Second

// Strata mounts with bin/strata (see cmd/strata for the CLI).
type Strata struct {
	// Bin is the strata binary (default: strata in BinDir).
	Bin string
	// Background uses the command users type (it returns once mounted and
	// serves from a daemon); otherwise --foreground runs the daemon as our
	// child, with its log in the spec's LogPath.
	Background bool
	// Flags are added to every mount (e.g. --metadata-ttl indefinite).
	Flags []string
}

func (s *Strata) Name() string { return "strata" }

func (s *Strata) bin() (string, error) {
	if s.Bin != "" {
		return s.Bin, nil
	}
	return Tool("strata")
}

// Available checks that the binary exists and has a mount command.
func (s *Strata) Available(ctx context.Context) error {
	bin, err := s.bin()
	if err != nil {
		return fmt.Errorf("strata binary missing (run `make build`): %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "mount", "--help").CombinedOutput()
	text := strings.ToLower(string(out))
	if err != nil || strings.Contains(text, "unknown command") || !strings.Contains(text, "--cache-dir") {
		return fmt.Errorf("`%s mount` is not implemented yet (%v): %s", bin, err, firstLine(string(out)))
	}
	return nil
}

// Version is `strata version`'s first line.
func (s *Strata) Version(ctx context.Context) string {
	bin, err := s.bin()
	if err != nil {
		return "missing"
	}
	return commandLine(ctx, bin, "version")
}

// Args returns the mount command line for spec (without the binary).
func (s *Strata) Args(spec MountSpec) []string {
	args := []string{"mount", "--cache-dir", spec.CacheDir}
	if !s.Background {
		args = append(args, "--foreground")
	}
	if spec.Scheme != "gs" {
		args = append(args, "--endpoint-url", spec.Endpoint, "--force-path-style", "--region", spec.Region)
	}
	if spec.Writable {
		args = append(args, "--read-only=false")
	}
	args = append(args, s.Flags...)
	args = append(args, spec.Extra...)
	return append(args, spec.Source(), spec.Mountpoint)
}

func (s *Strata) env(spec MountSpec) []string {
	// The S3 credentials also serve a --shared-cache tier on MinIO in
	// front of a gs:// origin.
	env := []string{"AWS_ACCESS_KEY_ID=" + spec.AccessKey, "AWS_SECRET_ACCESS_KEY=" + spec.SecretKey,
		"AWS_REGION=" + spec.Region, "AWS_EC2_METADATA_DISABLED=true"}
	if spec.Scheme == "gs" {
		env = append(env, "STORAGE_EMULATOR_HOST="+spec.hostPort())
	}
	return env
}

// Mount mounts spec with strata.
func (s *Strata) Mount(ctx context.Context, spec MountSpec) (*Mount, error) {
	bin, err := s.bin()
	if err != nil {
		return nil, err
	}
	if err := prepareMountpoint(spec); err != nil {
		return nil, err
	}
	args := s.Args(spec)
	m := &Mount{Root: spec.Mountpoint, Command: "strata " + strings.Join(args, " ")}
	if !s.Background {
		p, err := StartProc("strata", spec.LogPath, s.env(spec), bin, args...)
		if err != nil {
			return nil, err
		}
		if err := waitMounted(ctx, spec.Mountpoint, p, mountTimeout); err != nil {
			_ = p.Stop(5 * time.Second)
			_ = Unmount(context.Background(), spec.Mountpoint)
			return nil, fmt.Errorf("workload: strata mount: %w", err)
		}
		m.Proc = p
		return m, nil
	}
	ctx2, cancel := context.WithTimeout(ctx, mountTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx2, bin, args...)
	cmd.Env = append(os.Environ(), s.env(spec)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("workload: %s: %w: %s", m.Command, err, strings.TrimSpace(string(out)))
	}
	if err := waitMounted(ctx, spec.Mountpoint, nil, 10*time.Second); err != nil {
		return nil, fmt.Errorf("workload: %s returned but: %w", m.Command, err)
	}
	m.Pid = findDaemon(bin, spec.Mountpoint)
	return m, nil
}

// findDaemon returns the pid of the process running bin's mount command
// with mp among its arguments (the background strata daemon), or 0.
func findDaemon(bin, mp string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) == filepath.Base(bin) && len(args) > 2 && args[1] == "mount" && slices.Contains(args[2:], mp) {
			return pid
		}
	}
	return 0
}

// RcloneTuning is how rclone's own documentation (`rclone mount --help`,
// the VFS sections) advises tuning a mount for a large dataset read many
// times and written by whole files: disk-backed read-ahead beyond the
// in-memory buffer, directory entries and attributes kept as long as
// Strata's default metadata TTL, a cache that outlives the run, fast
// fingerprints, and more parallel transfers and multipart uploads.
var RcloneTuning = []string{
	"--vfs-read-ahead", "256M", "--buffer-size", "32M",
	"--dir-cache-time", "1h", "--attr-timeout", "1m", "--vfs-cache-max-age", "24h",
	"--vfs-fast-fingerprint", "--transfers", "16", "--s3-upload-concurrency", "8",
}

// S3fsTuning is how s3fs's documentation (`s3fs --help`) advises the same:
// more parallel multipart requests with bigger parts, a larger and longer
// stat cache with negative entries, and the kernel's page cache kept
// across opens (kernel_cache, a FUSE option).
var S3fsTuning = []string{
	"parallel_count=16", "multipart_size=32", "stat_cache_expire=3600",
	"max_stat_cache_size=200000", "enable_noobj_cache", "kernel_cache",
}

// Rclone mounts with `rclone mount --vfs-cache-mode full` and RcloneTuning.
type Rclone struct {
	// Flags are added to every mount.
	Flags []string
}

func (r *Rclone) Name() string { return "rclone" }

func (r *Rclone) Available(ctx context.Context) error {
	_, err := exec.LookPath("rclone")
	return err
}

func (r *Rclone) Version(ctx context.Context) string { return commandLine(ctx, "rclone", "version") }

func (r *Rclone) Mount(ctx context.Context, spec MountSpec) (*Mount, error) {
	if err := prepareMountpoint(spec); err != nil {
		return nil, err
	}
	cfg := filepath.Join(filepath.Dir(spec.LogPath), "rclone.conf")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		return nil, fmt.Errorf("workload: rclone: %w", err)
	}
	env := []string{
		"RCLONE_CONFIG_BENCH_TYPE=s3", "RCLONE_CONFIG_BENCH_PROVIDER=Minio",
		"RCLONE_CONFIG_BENCH_ENV_AUTH=false",
		"RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=" + spec.AccessKey,
		"RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=" + spec.SecretKey,
		"RCLONE_CONFIG_BENCH_ENDPOINT=" + spec.Endpoint,
		"RCLONE_CONFIG_BENCH_REGION=" + spec.Region,
		"RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true",
		// rclone 1.60 cannot apply a CA bundle to its transport and fails
		// at start-up when one is set; the endpoint is plain HTTP anyway.
		"!AWS_CA_BUNDLE",
	}
	remote := "bench:" + spec.Bucket
	if p := trimSlashes(spec.Prefix); p != "" {
		remote += "/" + p
	}
	args := []string{"mount", remote, spec.Mountpoint, "--config", cfg,
		"--vfs-cache-mode", "full", "--cache-dir", spec.CacheDir,
		"--s3-no-check-bucket", "--log-level", "NOTICE"}
	args = append(args, RcloneTuning...)
	if !spec.Writable {
		args = append(args, "--read-only")
	}
	args = append(append(args, r.Flags...), spec.Extra...)
	p, err := StartProc("rclone", spec.LogPath, env, "rclone", args...)
	if err != nil {
		return nil, err
	}
	if err := waitMounted(ctx, spec.Mountpoint, p, mountTimeout); err != nil {
		_ = p.Stop(5 * time.Second)
		_ = Unmount(context.Background(), spec.Mountpoint)
		return nil, fmt.Errorf("workload: rclone mount: %w", err)
	}
	return &Mount{Root: spec.Mountpoint, Proc: p, Command: "rclone " + strings.Join(args, " ")}, nil
}

// S3fs mounts with `s3fs -o use_cache=DIR` and S3fsTuning.
type S3fs struct {
	// Options are added as -o options to every mount.
	Options []string
}

func (s *S3fs) Name() string { return "s3fs" }

func (s *S3fs) Available(ctx context.Context) error {
	_, err := exec.LookPath("s3fs")
	return err
}

func (s *S3fs) Version(ctx context.Context) string { return commandLine(ctx, "s3fs", "--version") }

func (s *S3fs) Mount(ctx context.Context, spec MountSpec) (*Mount, error) {
	if err := prepareMountpoint(spec); err != nil {
		return nil, err
	}
	passwd := filepath.Join(filepath.Dir(spec.LogPath), "s3fs.passwd")
	if err := os.WriteFile(passwd, []byte(spec.AccessKey+":"+spec.SecretKey+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("workload: s3fs: %w", err)
	}
	bucket := spec.Bucket
	if p := trimSlashes(spec.Prefix); p != "" {
		bucket += ":/" + p
	}
	opts := []string{"url=" + spec.Endpoint, "use_path_request_style", "use_cache=" + spec.CacheDir,
		"passwd_file=" + passwd, "endpoint=" + spec.Region, "dbglevel=warn"}
	opts = append(opts, S3fsTuning...)
	if !spec.Writable {
		opts = append(opts, "ro")
	}
	opts = append(opts, s.Options...)
	args := []string{bucket, spec.Mountpoint, "-f", "-o", strings.Join(opts, ",")}
	args = append(args, spec.Extra...)
	p, err := StartProc("s3fs", spec.LogPath, nil, "s3fs", args...)
	if err != nil {
		return nil, err
	}
	if err := waitMounted(ctx, spec.Mountpoint, p, mountTimeout); err != nil {
		_ = p.Stop(5 * time.Second)
		_ = Unmount(context.Background(), spec.Mountpoint)
		return nil, fmt.Errorf("workload: s3fs mount: %w", err)
	}
	return &Mount{Root: spec.Mountpoint, Proc: p, Command: "s3fs " + strings.Join(args, " ")}, nil
}

func commandLine(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "unknown (" + err.Error() + ")"
	}
	return firstLine(string(out))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
