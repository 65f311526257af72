package mount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/shared"
	"github.com/stratafs/strata/internal/config"
)

// sharedState is what the shared tier keeps while mounted.
type sharedState struct {
	tier  *shared.Tier
	path  string // <cache-dir>/shared.json
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup
}

// Tier returns the running tier (for metrics), nil when none is configured.
func (st *sharedState) Tier() *shared.Tier {
	if st == nil {
		return nil
	}
	return st.tier
}

// sharedCheckTimeout bounds the mount-time check of the tier.
const sharedCheckTimeout = 15 * time.Second

// wrapShared puts the shared cache tier (if configured) in front of the
// origin backend; the fetcher then reads through it.
//
// At mount the tier must prove it works (the marker object is written and
// read back). A tier that answers but refuses (no such bucket, access
// denied, wrong bytes back) fails the mount: that is a configuration to
// fix, and a tier silently ignored would cost every node the full origin
// traffic unnoticed. A tier that does not answer (unreachable, timing out)
// only warns: it is a cache, the origin serves every read without it, and
// a restarting in-cluster store must not keep training jobs from starting;
// the mount then probes it again after the breaker's cooldown.
func wrapShared(ctx context.Context, s *Mount, origin backend.Backend) (backend.Backend, error) {
	c := &s.cfg.Shared
	if !c.Enabled() {
		return origin, nil
	}
	bucket, prefix, err := c.Location()
	if err != nil {
		return origin, err
	}
	store, err := shared.NewS3(ctx, bucket, shared.S3Options{Endpoint: c.EndpointURL, Region: c.Region, Profile: c.Profile,
		ForcePathStyle: c.ForcePathStyle, Timeout: c.Timeout, MaxConns: max(256, 4*s.cfg.MaxFetches)})
	if err != nil {
		return origin, fmt.Errorf("--shared-cache %s: %w", c.URL, err)
	}
	cctx, cancel := context.WithTimeout(ctx, sharedCheckTimeout)
	checkErr := shared.Check(cctx, store, prefix, c.ReadOnly)
	cancel()
	down := errors.Is(checkErr, backend.ErrUnavailable) || errors.Is(checkErr, context.DeadlineExceeded)
	if checkErr != nil && !down {
		store.Close()
		return origin, describeSharedErr(c, checkErr)
	}
	key, err := readSharedKey(c.KeyFile)
	if err != nil {
		store.Close()
		return origin, err
	}
	o := shared.DefaultOptions()
	o.Key = key
	o.Prefix, o.BlockSize, o.GroupSize = prefix, int64(s.cfg.BlockSize), int64(c.GroupSize)
	o.Timeout, o.ReadOnly = c.Timeout, c.ReadOnly
	o.WriteConcurrency, o.WriteBuffer = c.WriteConcurrency, int64(c.WriteBuffer)
	o.Logger = s.log
	tier, err := shared.New(origin, store, o)
	if err != nil {
		store.Close()
		return origin, fmt.Errorf("--shared-cache %s: %w", c.URL, err)
	}
	if down {
		s.log.Warn("shared cache unreachable; reading from the origin only, retrying it every little while",
			"shared_cache", c.URL, "err", checkErr)
		tier.MarkDown(checkErr)
	}
	l := tier.Layout()
	if c.KeyFile == "" {
		s.log.Warn("shared cache entries are not signed: whoever can write the tier bucket can change what this mount reads; " +
			"set --shared-cache-key-file on every node (CSI node mode requires it)")
	}
	s.log.Info("shared cache", "shared_cache", c.URL, "store", store.String(), "blocks_per_object", l.GroupBlocks,
		"read_only", c.ReadOnly, "timeout", c.Timeout.String(), "signed", key != nil)
	st := &sharedState{tier: tier, path: filepath.Join(s.cfg.CacheDir, "shared.json"), start: time.Now(), stop: make(chan struct{})}
	s.shared = st
	st.done.Add(1)
	go st.report(s)
	return tier.Backend(), nil
}

// readSharedKey reads --shared-cache-key-file: its bytes, without the
// surrounding white space a text editor or `echo` leaves. nil when unset.
func readSharedKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--shared-cache-key-file: %w", err)
	}
	key := bytes.TrimSpace(b)
	if len(key) < shared.MinKeyLen {
		return nil, fmt.Errorf("--shared-cache-key-file %s: %d bytes of key, want at least %d (e.g. head -c 32 /dev/urandom | base64 > FILE)",
			path, len(key), shared.MinKeyLen)
	}
	return key, nil
}

// describeSharedErr says what to fix when the tier refused the check.
func describeSharedErr(c *config.SharedConfig, err error) error {
	hint := ""
	switch {
	case errors.Is(err, backend.ErrNoBucket):
		hint = "the bucket does not exist (check the name, --shared-cache-endpoint-url and --shared-cache-region)"
	case errors.Is(err, backend.ErrAccessDenied):
		hint = "access denied: the credentials (--shared-cache-profile or the standard chain) need s3:GetObject, s3:PutObject " +
			"and s3:ListBucket (s3express:CreateSession on a directory bucket), or use --shared-cache-read-only"
	default:
		hint = "the shared cache does not work as an S3 bucket should"
	}
	return fmt.Errorf("--shared-cache %s: %s: %w", c.URL, hint, err)
}

// sharedReport is <cache-dir>/shared.json: the tier's counters, so tests,
// `cat` and dashboards can see how much origin traffic the tier saved.
type sharedReport struct {
	Source      string          `json:"source"`
	SharedCache string          `json:"shared_cache"`
	Started     time.Time       `json:"started"`
	Updated     time.Time       `json:"updated"`
	Running     bool            `json:"running"`
	Stats       shared.Snapshot `json:"stats"`
}

// report rewrites shared.json every 2 s until closeShared.
func (st *sharedState) report(s *Mount) {
	defer st.done.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		st.write(s, true)
		select {
		case <-st.stop:
			return
		case <-t.C:
		}
	}
}

func (st *sharedState) write(s *Mount, running bool) {
	b, err := json.MarshalIndent(sharedReport{Source: s.src.String(), SharedCache: s.cfg.Shared.URL, Started: st.start,
		Updated: time.Now(), Running: running, Stats: st.tier.Stats().Snapshot()}, "", "  ")
	if err != nil {
		return
	}
	tmp := st.path + ".tmp"
	// Best effort, like the marshal above: the next write tries again.
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		_ = os.Rename(tmp, st.path)
	}
}

// closeShared drains the tier's background writes (bounded), closes it
// (its store and the origin) and writes the final counters.
func closeShared(s *Mount) {
	st := s.shared
	close(st.stop)
	st.done.Wait()
	if err := st.tier.Close(); err != nil {
		s.log.Warn("closing the shared cache", "err", err)
	}
	st.write(s, false)
	snap := st.tier.Stats().Snapshot()
	s.log.Info("shared cache summary", "hit_bytes", snap.HitBytes, "miss_bytes", snap.MissBytes,
		"origin_bytes", snap.Origin.Bytes, "writes", snap.Writes, "writes_dropped", snap.WritesDropped, "bad_entries", snap.BadEntries,
		"forged_entries", snap.ForgedEntries)
}
