// Package mount puts a Strata mount together, once, for every caller: the
// CLI (`strata mount`, and the CSI node plugin's node mode, which runs
// it), the sidecar serving a /dev/fuse descriptor handed over by the CSI
// plugin, and the offline `strata warm`.
//
// Start takes Options (the config.Config, the source, the mountpoint and
// a logger) and returns a running *Mount: backend (instrumented for
// metrics), I/O engine, cache store, backend check, shared tier, metadata
// cache, fetcher, then the FUSE filesystem, the write path, the kernel
// mount, the session file, operations (metrics, control socket, signals)
// and background warming (--warm-on-mount). Open builds the same stack up
// to the fetcher, without FUSE. Wait blocks until the kernel unmounts,
// Unmount detaches, Close releases everything in reverse order (draining
// pending uploads first).
//
// Each feature group of internal/config hooks into Start and Close from
// its own file (write.go, shared.go, ops.go, background.go), so features
// grow without editing the assembly in assemble.go; their flags are bound
// in cmd/strata/flags.go.
//
// The mount answers the control socket (internal/control) with its
// Handler: stats, warm (internal/warm), verify and gc (internal/cachetools)
// and refresh.
//
// Locks: mount holds none of its own; its background goroutines (session
// writer, shared-tier report, signal loop, warm-on-mount) are stopped by
// channels and waited for in Close, before what they read is closed.
//
// Before Start, Prepare validates the settings and resolves the
// mountpoint and cache dir, and preflight.go has the other checks a CLI
// mount makes (an empty mountpoint, a cache dir another mount still
// holds, a dead mount to detach) and the mountinfo reader; fusecheck.go
// checks that this user can mount FUSE here at all (/dev/fuse,
// fusermount3, user_allow_other), since fusermount3's own message never
// reaches the user of a background mount.
//
// mount may import backend/..., cache/..., prefetch, fs and the other
// internal packages; only cmd/strata and internal/sidecar (which serves
// handed-over mounts with it) import it.
package mount
