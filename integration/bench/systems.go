package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// Role says how a system's rows are compared.
type Role int

const (
	// RoleLocal is the physical limit: the data on local disk.
	RoleLocal Role = iota
	// RoleSubject rows get ratios (Strata, and later rows such as a
	// second node).
	RoleSubject
	// RolePeer is another FUSE client; the best peer is the bar.
	RolePeer
	// RoleReference is the plain GET client: what the server delivers.
	RoleReference
)

// System is one thing measured.
type System struct {
	Name string
	Role Role
	// Client systems are not filesystems: workloads run their
	// RunClient instead (nil Open).
	Client bool
	// Available returns nil when the system can run here.
	Available func(ctx context.Context) error
	// Version describes the system's version for the report.
	Version func(ctx context.Context) string
	// Open presents a workload's part (its prefix) as a directory, at a
	// latency, with an empty cache; writable for workloads that write.
	Open func(ctx context.Context, e *Env, o OpenOpts) (FS, error)
	// Runs reports whether the system takes part in a workload (nil:
	// every workload).
	Runs func(workload string) bool
	// GCS systems also run with -backend gcs.
	GCS bool
	// NotRun says why the system does not take part in a workload Runs
	// leaves it out of ("": no row); the report gets a row saying so.
	NotRun func(workload string) string
}

// only restricts a system to some workloads.
func only(names ...string) func(string) bool {
	return func(w string) bool { return contains(names, w) }
}

// except keeps a system out of some workloads.
func except(names ...string) func(string) bool {
	return func(w string) bool { return !contains(names, w) }
}

// OpenOpts says what a workload needs from a system.
type OpenOpts struct {
	Prefix   string
	Latency  Latency
	Writable bool
	// Tag names the run's directories and logs.
	Tag string
}

// FS is one workload's view of a system: a directory to read, and (for
// mounts) restarts.
type FS interface {
	Root() string
	// Restart unmounts and mounts again on the same cache dir.
	Restart(ctx context.Context) error
	// Fresh unmounts, empties the cache and mounts again: Empty, then
	// Mount.
	Fresh(ctx context.Context) error
	// Empty unmounts and empties the cache, leaving the system unmounted
	// until Mount (a phase that times the mount itself).
	Empty(ctx context.Context) error
	// Mount mounts an unmounted system (no-op when mounted).
	Mount(ctx context.Context) error
	// Stats returns strata's cache counters as of at least t (nil when the
	// system has none).
	Stats(ctx context.Context, t time.Time) (*workload.CacheStats, error)
	// Command is how it was mounted, for the report.
	Command() string
	Close(ctx context.Context) error
}

// allSystems lists every system in report order.
func allSystems(cfg Config) []System {
	strata := &workload.Strata{Flags: cfg.StrataFlags}
	return []System{
		{Name: "local", Role: RoleLocal, GCS: true,
			Version: func(context.Context) string { return "the dataset's source directory" },
			Open: func(_ context.Context, e *Env, o OpenOpts) (FS, error) {
				return localFS{root: filepath.Join(e.PartDir(o.Prefix), o.Prefix)}, nil
			}},
		withGCS(mountSystem(strata, RoleSubject, strata.Available, strata.Version, true)),
		asyncSystem(cfg),
		indefiniteSystem(cfg),
		userspaceSystem(cfg),
		sidecarSystem(cfg),
		secondNodeSystem(cfg),
		mountSystem(&workload.Rclone{Flags: cfg.RcloneFlags}, RolePeer, nil, (&workload.Rclone{}).Version, false),
		s3fsSystem(),
		{Name: "get", Role: RoleReference, Client: true,
			Version: func(context.Context) string {
				return "aws-sdk-go-v2 ranged GETs, 8 MiB parts, 4 per object, bytes discarded"
			}},
	}
}

// asyncName is strata with --upload=async: only the checkpoint runs on
// it (reads do not depend on the upload mode).
const asyncName = "strata-async"

func asyncSystem(cfg Config) System {
	return flaggedSystem(cfg, asyncName, only("checkpoint"), false, "--upload", "async")
}

// flaggedSystem is strata with flags added to -strata-flags, named apart
// and run on the workloads runs allows; its version line names the flags.
func flaggedSystem(cfg Config, name string, runs func(string) bool, gcs bool, flags ...string) System {
	m := &workload.Strata{Flags: append(append([]string{}, cfg.StrataFlags...), flags...)}
	s := mountSystem(m, RoleSubject, m.Available, func(ctx context.Context) string {
		return m.Version(ctx) + ", " + strings.Join(flags, " ")
	}, true)
	s.Name, s.Runs, s.GCS = name, runs, gcs
	return s
}

// indefiniteName is strata with --metadata-ttl indefinite (listings and
// lookups trusted for the cache's life), labelled apart from strata's
// default rows: only the listing runs on it, where the flag is the point
// (a remount lists from the cache).
const indefiniteName = "strata-indefinite"

func indefiniteSystem(cfg Config) System {
	return flaggedSystem(cfg, indefiniteName, only("listing"), true, "--metadata-ttl", "indefinite")
}

// userspaceName is strata with --passthrough off: every read of a cached
// file goes through the daemon, as on a kernel or in a container without
// FUSE passthrough. Labelled apart; only the read paths whose warm phases
// passthrough serves run on it (issue #14's userspace rows).
const userspaceName = "strata-userspace"

func userspaceSystem(cfg Config) System {
	return flaggedSystem(cfg, userspaceName, only("imagefolder", "webdataset", "random"), true, "--passthrough", "off")
}

// sidecarName is strata served as the CSI driver's sidecar mode serves a
// pod's volume: the node plugin mounts, a sidecar without CAP_SYS_ADMIN
// serves, the plugin registers its cache files for passthrough (issue
// #14's sidecar rows, beside strata's, which is what node mode runs).
const sidecarName = "strata-sidecar"

func sidecarSystem(cfg Config) System {
	m := &workload.StrataSidecar{Flags: mountOptions(cfg.StrataFlags)}
	s := System{Name: sidecarName, Role: RoleSubject, Available: m.Available,
		Version: func(ctx context.Context) string {
			return (&workload.Strata{}).Version(ctx) + ", CSI sidecar mode (no CAP_SYS_ADMIN)"
		},
		Runs: only("imagefolder", "webdataset"),
		// Where kubelet would put the pod's volume, and the sidecar's
		// cache of it under its cache root.
		Open: mountOpener(m, true, func(base string) (mountpoint, cacheDir string) {
			return workload.SidecarTarget(base, "data"), filepath.Join(base, "sidecar-cache", "data")
		})}
	return s
}

// mountOptions turns mount flags ("--name value", "--name=value",
// "--flag") into a CSI volume's mountOptions ("name=value", "flag").
func mountOptions(flags []string) []string {
	var out []string
	for i := 0; i < len(flags); i++ {
		name, ok := strings.CutPrefix(flags[i], "--")
		if !ok {
			continue
		}
		if !strings.Contains(name, "=") && i+1 < len(flags) && !strings.HasPrefix(flags[i+1], "--") {
			name += "=" + flags[i+1]
			i++
		}
		out = append(out, name)
	}
	return out
}

// s3fsSystem is s3fs, left out of the checkpoint workload.
func s3fsSystem() System {
	s := withRuns(mountSystem(&workload.S3fs{}, RolePeer, nil, (&workload.S3fs{}).Version, false), except("checkpoint"))
	s.NotRun = func(w string) string {
		if w == "checkpoint" {
			return "not run: s3fs's write path has not been validated in this benchmark (excluded since the first checkpoint rows)"
		}
		return ""
	}
	return s
}

func withGCS(s System) System {
	s.GCS = true
	return s
}

func withRuns(s System, runs func(string) bool) System {
	s.Runs = runs
	return s
}

func systemNames() []string {
	var out []string
	for _, s := range allSystems(Config{}) {
		out = append(out, s.Name)
	}
	return out
}

func mountSystem(m workload.Mounter, role Role, avail func(context.Context) error, version func(context.Context) string, stats bool) System {
	if avail == nil {
		avail = m.Available
	}
	return System{Name: m.Name(), Role: role, Available: avail, Version: version,
		Open: mountOpener(m, stats, func(base string) (string, string) {
			return filepath.Join(base, "mnt"), filepath.Join(base, "cache")
		})}
}

// mountOpener opens a workload's part on m, in a fresh run directory
// (base) where layout puts the mount point and the cache.
func mountOpener(m workload.Mounter, stats bool, layout func(base string) (mountpoint, cacheDir string)) func(context.Context, *Env, OpenOpts) (FS, error) {
	return func(ctx context.Context, e *Env, o OpenOpts) (FS, error) {
		base := filepath.Join(e.Cfg.WorkDir, "run", o.Tag)
		if err := os.RemoveAll(base); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		mnt, cacheDir := layout(base)
		spec := workload.MountSpec{Scheme: e.scheme(), Bucket: e.Bucket(o.Prefix), Prefix: o.Prefix, Endpoint: o.Latency.Endpoint,
			Region: e.MinIO.Region, AccessKey: e.MinIO.AccessKey, SecretKey: e.MinIO.SecretKey,
			CacheDir: cacheDir, Mountpoint: mnt,
			LogPath: filepath.Join(e.Cfg.WorkDir, "logs", o.Tag+".log"), Writable: o.Writable}
		f := &mountFS{m: m, spec: spec, base: base, stats: stats}
		if err := f.mount(ctx); err != nil {
			return nil, err
		}
		return f, nil
	}
}

// localFS is a directory on local disk.
type localFS struct{ root string }

func (l localFS) Root() string                                                   { return l.root }
func (l localFS) Restart(context.Context) error                                  { return nil }
func (l localFS) Fresh(context.Context) error                                    { return nil }
func (l localFS) Empty(context.Context) error                                    { return nil }
func (l localFS) Mount(context.Context) error                                    { return nil }
func (l localFS) Command() string                                                { return "" }
func (l localFS) Close(context.Context) error                                    { return nil }
func (l localFS) Stats(context.Context, time.Time) (*workload.CacheStats, error) { return nil, nil }

// mountFS is a FUSE mount of the workload's prefix.
type mountFS struct {
	m     workload.Mounter
	spec  workload.MountSpec
	base  string
	mnt   *workload.Mount
	stats bool
}

func (f *mountFS) mount(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(f.spec.LogPath), 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	mnt, err := f.m.Mount(ctx, f.spec)
	if err != nil {
		return err
	}
	f.mnt = mnt
	return nil
}

func (f *mountFS) Root() string { return f.spec.Mountpoint }

func (f *mountFS) Command() string {
	if f.mnt == nil {
		return ""
	}
	// Credentials never reach the report.
	return strings.ReplaceAll(f.mnt.Command, f.spec.SecretKey, "***")
}

func (f *mountFS) unmount(ctx context.Context) error {
	if f.mnt == nil {
		return nil
	}
	err := f.mnt.Unmount(ctx)
	f.mnt = nil
	return err
}

func (f *mountFS) Restart(ctx context.Context) error {
	if err := f.unmount(ctx); err != nil {
		return err
	}
	return f.mount(ctx)
}

func (f *mountFS) Fresh(ctx context.Context) error {
	if err := f.Empty(ctx); err != nil {
		return err
	}
	return f.mount(ctx)
}

func (f *mountFS) Empty(ctx context.Context) error {
	if err := f.unmount(ctx); err != nil {
		return err
	}
	if err := os.RemoveAll(f.spec.CacheDir); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

func (f *mountFS) Mount(ctx context.Context) error {
	if f.mnt != nil {
		return nil
	}
	return f.mount(ctx)
}

func (f *mountFS) Stats(ctx context.Context, t time.Time) (*workload.CacheStats, error) {
	if !f.stats {
		return nil, nil
	}
	bin, err := workload.Tool("strata")
	if err != nil {
		return nil, err
	}
	cs, err := workload.StrataStatsAfter(ctx, bin, f.spec.CacheDir, t)
	if err != nil {
		return nil, err
	}
	return &cs, nil
}

// Close unmounts and removes the cache and mount point.
func (f *mountFS) Close(ctx context.Context) error {
	err := f.unmount(ctx)
	if err == nil {
		err = os.RemoveAll(f.base)
	}
	return err
}
