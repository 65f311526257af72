package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Version is set at build time (-ldflags -X).
var Version = "dev"

// Config is everything a mount can be told. The yaml keys are the flag
// names, so a config file reads like the command line.
type Config struct {
	CacheDir    string `yaml:"cache-dir"`
	CacheSize   Size   `yaml:"cache-size"`
	MetadataTTL TTL    `yaml:"metadata-ttl"`

	EndpointURL    string `yaml:"endpoint-url"`
	Region         string `yaml:"region"`
	Profile        string `yaml:"profile"`
	ForcePathStyle bool   `yaml:"force-path-style"`
	NoSignRequest  bool   `yaml:"no-sign-request"`
	KeyFile        string `yaml:"key-file"`
	Anonymous      bool   `yaml:"anonymous"`

	ReadOnly   bool `yaml:"read-only"`
	AllowOther bool `yaml:"allow-other"`
	UID        int  `yaml:"uid"`
	GID        int  `yaml:"gid"`
	FileMode   Mode `yaml:"file-mode"`
	DirMode    Mode `yaml:"dir-mode"`

	Foreground bool   `yaml:"foreground"`
	LogLevel   string `yaml:"log-level"`
	LogFormat  string `yaml:"log-format"`
	LogFile    string `yaml:"log-file"`

	BlockSize    Size   `yaml:"block-size"`
	MemoryLimit  Size   `yaml:"memory-limit"`
	MaxReadahead Size   `yaml:"max-readahead"`
	PartSize     Size   `yaml:"part-size"`
	SmallObject  Size   `yaml:"small-object"`
	RandomFill   Size   `yaml:"random-fill-max"`
	LookupFetch  Size   `yaml:"lookup-fetch"`
	MaxFetches   int    `yaml:"max-fetches"`
	ReadAheadKB  int    `yaml:"read-ahead-kb"`
	Passthrough  string `yaml:"passthrough"`
	IOEngine     string `yaml:"io-engine"`
	DirPrefetch  bool   `yaml:"dir-prefetch"`
	ListPrefetch bool   `yaml:"list-prefetch"`

	// Feature groups, each defined (with its defaults and checks) in its
	// own file; their keys sit at the top level of a config file.
	Write  WriteConfig  `yaml:",inline"` // write.go: checkpoint writes
	Shared SharedConfig `yaml:",inline"` // shared.go: second cache tier
	Ops    OpsConfig    `yaml:",inline"` // ops.go: metrics, warming, config file
}

var errBad = errors.New("invalid setting")

// Validate checks the settings that do not depend on the machine.
func (c *Config) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{errBad}, a...)...) }
	switch {
	case c.BlockSize < 64<<10 || c.BlockSize > 64<<20 || c.BlockSize&(c.BlockSize-1) != 0:
		return bad("--block-size %s: want a power of two from 64KiB to 64MiB", c.BlockSize)
	case c.CacheSize != 0 && c.CacheSize < 4*c.BlockSize:
		// Ten bytes (a unit forgotten) would cache nothing and fail every write.
		return bad("--cache-size %s: want at least 4 blocks (%s), with a unit (100GiB, 512MiB); omit it to keep 10%% of the disk free", c.CacheSize, 4*c.BlockSize)
	case c.MemoryLimit < 4*c.BlockSize:
		return bad("--memory-limit %s: want at least 4 blocks (%s)", c.MemoryLimit, 4*c.BlockSize)
	case c.PartSize < c.BlockSize:
		return bad("--part-size %s: want at least one block (%s)", c.PartSize, c.BlockSize)
	case c.MaxReadahead < c.BlockSize:
		return bad("--max-readahead %s: want at least one block (%s)", c.MaxReadahead, c.BlockSize)
	case c.MaxFetches < 1 || c.MaxFetches > 4096:
		return bad("--max-fetches %d: want 1 to 4096", c.MaxFetches)
	case c.ReadAheadKB < 0:
		return bad("--read-ahead-kb %d: want 0 or more", c.ReadAheadKB)
	case c.UID < -1 || c.GID < -1:
		return bad("--uid/--gid: want a non-negative id")
	}
	if !oneOf(c.Passthrough, "auto", "on", "off") {
		return bad("--passthrough %q: want auto, on or off", c.Passthrough)
	}
	if !oneOf(c.IOEngine, "auto", "uring", "pread") {
		return bad("--io-engine %q: want auto, uring or pread", c.IOEngine)
	}
	if !oneOf(c.LogLevel, "debug", "info", "warn", "error") {
		return bad("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	if !oneOf(c.LogFormat, "auto", "text", "json") {
		return bad("--log-format %q: want auto, text or json", c.LogFormat)
	}
	if c.EndpointURL != "" && !strings.HasPrefix(c.EndpointURL, "http://") && !strings.HasPrefix(c.EndpointURL, "https://") {
		return bad("--endpoint-url %q: want http://host[:port] or https://host[:port]", c.EndpointURL)
	}
	for _, check := range []func() error{c.Write.validate, c.Shared.validate, c.Ops.validate} {
		if err := check(); err != nil {
			return fmt.Errorf("%w: %w", errBad, err)
		}
	}
	return nil
}

func oneOf(v string, options ...string) bool {
	for _, o := range options {
		if v == o {
			return true
		}
	}
	return false
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// DefaultCacheDir is a per-user, per-source directory under the XDG cache
// home, so several default mounts can run side by side.
func DefaultCacheDir(src Source, endpoint string) (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --cache-dir and no home directory: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	sum := sha256.Sum256([]byte(src.String() + "\x00" + endpoint))
	name := src.Scheme + "-" + src.Bucket
	if src.Scheme == "file" {
		name = "file" + src.Path
	}
	name = strings.Trim(unsafeChars.ReplaceAllString(name, "-"), "-")
	if len(name) > 64 {
		name = name[:64]
	}
	return filepath.Join(base, "strata", name+"-"+hex.EncodeToString(sum[:4])), nil
}

// OfflineStartEnv, set to "never" in the environment of `strata mount`,
// makes a mount whose backend check finds the endpoint unreachable fail
// instead of starting offline on what its cache holds (--metadata-ttl
// indefinite). The CSI plugin sets it for a node-mode volume whose Secret
// has not passed the backend's check on that cache before: node-mode
// caches are shared by identity (the access key id), not by secret, and
// offline nothing checks the secret.
const OfflineStartEnv = "STRATA_OFFLINE_START"
