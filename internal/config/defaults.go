package config

import "time"

// The one table of user-visible defaults. The mount flags (and with them
// the YAML config file and --print-config, which go through the flags),
// the mount assembly (internal/mount fills every package's Options from a
// Config) and the flags of strata csi and strata sidecar read their
// defaults here. README's flag tables are checked against it
// (cmd/strata's TestREADMEDefaults), and the lower packages' own
// DefaultOptions, kept for their unit tests, are checked against it by
// internal/mount's TestPackageDefaultsMatchTheTable.

// Defaults are the mount's settings before flags and config files: the
// defaults of strata mount, strata warm and the volume attributes of the
// CSI driver.
func Defaults() Config {
	return Config{
		MetadataTTL:  TTL(60e9),
		ReadOnly:     false,
		UID:          -1,
		GID:          -1,
		FileMode:     0o644,
		DirMode:      0o755,
		LogLevel:     "info",
		LogFormat:    "auto",
		BlockSize:    1 << 20,
		MemoryLimit:  256 << 20,
		MaxReadahead: 64 << 20,
		PartSize:     8 << 20,
		SmallObject:  4 << 20,
		RandomFill:   16 << 30,
		LookupFetch:  256 << 10,
		MaxFetches:   64,
		ReadAheadKB:  1024,
		Passthrough:  "auto",
		IOEngine:     "auto",
		DirPrefetch:  true,
		ListPrefetch: true,
		Write:        defaultWrite(),
		Shared:       defaultShared(),
		Ops:          defaultOps(),
	}
}

// MinFreeFraction is the share of the cache filesystem kept free when no
// --cache-size is given.
const MinFreeFraction = 0.10

func defaultWrite() WriteConfig {
	return WriteConfig{Upload: "sync", UploadConcurrency: 4, UploadDelay: 5 * time.Second, RenameDirLimit: 1000}
}

func defaultShared() SharedConfig {
	return SharedConfig{GroupSize: 1 << 20, Timeout: time.Second, WriteConcurrency: 8, WriteBuffer: 64 << 20}
}

func defaultOps() OpsConfig {
	return OpsConfig{ControlSocket: true, WarmConcurrency: 16, History: 20}
}

// CSIDefaults are the defaults of `strata csi` (the DaemonSet's node
// plugin) and `strata sidecar` (in the workload pod).
type CSIDefaults struct {
	Endpoint       string        // --endpoint
	CacheRoot      string        // --cache-root: node mode's per-dataset caches
	StateDir       string        // --state-dir: node mode's shared mountpoints
	HandoffTimeout time.Duration // --handoff-timeout
	// The sidecar's --handoff-dir (the emptyDir shared with the plugin)
	// and --cache-dir (parent of the per-volume caches).
	SidecarHandoffDir string
	SidecarCacheDir   string
	LogLevel          string // --log-level of both
	LogFormat         string // --log-format of both
}

// CSI are the defaults of the CSI node plugin and the sidecar.
func CSI() CSIDefaults {
	return CSIDefaults{
		Endpoint: "unix:///csi/csi.sock", CacheRoot: "/var/lib/strata/cache", StateDir: "/var/lib/strata/csi",
		HandoffTimeout: time.Hour, SidecarHandoffDir: "/strata-handoff", SidecarCacheDir: "/strata-cache",
		LogLevel: "info", LogFormat: "auto",
	}
}

// ToolDefaults are the defaults of the flags of the other commands.
type ToolDefaults struct {
	ProgressInterval  time.Duration // strata warm --progress-interval
	SyncProgressEvery time.Duration // strata sync --progress-every
	StatsLast         int           // strata cache stats --last
	VerifyWorkers     int           // strata cache verify --workers
}

// Tools are the defaults of the flags of warm, sync and the cache tools.
func Tools() ToolDefaults {
	return ToolDefaults{ProgressInterval: 10 * time.Second, SyncProgressEvery: 5 * time.Second, StatsLast: 10, VerifyWorkers: 4}
}
