package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/internal/config"
)

// Node mode: one `strata mount` per distinct volume (source, arguments,
// credentials) on the node, run by the privileged plugin so passthrough
// works, with its cache under CacheRoot so consecutive jobs find it warm.
// Each pod's target is a bind mount of it. On disk, under StateDir/node:
//
//	<key>/mnt            the shared mountpoint
//	<key>/targets/<h>    one file per bind target (h hashes the path), holding the path
//	<key>/cachedir       the cache directory the mount uses
//	<key>/creds/         secret files (0600), e.g. key.json
//	<key>/strata.log     the mount's log
//
// The target files are the reference count: the shared mount stops when
// the last one goes, and a restarted plugin still knows who uses what.

type nodeShares struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per share key
}

func newNodeShares(opts Options, log *slog.Logger) *nodeShares {
	return &nodeShares{opts: opts, log: log, locks: map[string]*sync.Mutex{}}
}

func (n *nodeShares) lock(key string) func() {
	n.mu.Lock()
	m := n.locks[key]
	if m == nil {
		m = &sync.Mutex{}
		n.locks[key] = m
	}
	n.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (n *nodeShares) root() string { return filepath.Join(n.opts.StateDir, "node") }

func targetHash(target string) string {
	s := sha256.Sum256([]byte(target))
	return hex.EncodeToString(s[:])[:24]
}

// publish binds the volume's shared mount (started if needed) on target.
func (n *nodeShares) publish(ctx context.Context, volumeID, target string, spec Spec, creds Credentials) error {
	if err := unsignedTier(spec, n.opts.tierKeyArgs(spec)); err != nil {
		return err
	}
	key := spec.ShareKey(creds)
	defer n.lock(key)()
	dir := filepath.Join(n.root(), key)
	mnt := filepath.Join(dir, "mnt")
	record := filepath.Join(dir, "targets", targetHash(target))
	if other := n.findTarget(target); other != "" && other != dir {
		return errorf(codes.AlreadyExists, "%s is already published with other attributes, credentials or read-only setting", target)
	}
	if ok, err := isMounted(target); err != nil {
		return err
	} else if ok {
		if _, err := os.Stat(record); err == nil && healthy(target) {
			return nil // already published
		}
		if err := unmountAll(target); err != nil { // a dead or foreign mount
			return err
		}
	}
	if err := n.ensureMounted(ctx, dir, mnt, spec, creds); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return fmt.Errorf("csi: state dir: %w", err)
	}
	if err := os.WriteFile(record, []byte(target), 0o600); err != nil {
		return fmt.Errorf("csi: record target: %w", err)
	}
	if err := bindMount(mnt, target, spec.ReadOnly); err != nil {
		os.Remove(record)
		n.stopIfUnused(dir)
		return err
	}
	n.log.Info("csi: node-mode volume published", "volume", volumeID, "target", target, "share", key,
		"users", len(n.targets(dir)), "pod", spec.PodNamespace+"/"+spec.PodName)
	return nil
}

// ensureMounted starts the shared mount unless it is up; a dead one (its
// process gone, ENOTCONN) is cleared first.
func (n *nodeShares) ensureMounted(ctx context.Context, dir, mnt string, spec Spec, creds Credentials) error {
	if ok, err := isMounted(mnt); err != nil {
		return err
	} else if ok {
		if healthy(mnt) {
			return nil
		}
		n.log.Warn("csi: shared mount died; restarting it", "mountpoint", mnt)
		if err := unmountAll(mnt); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return fmt.Errorf("csi: shared mountpoint: %w", err)
	}
	credDir := filepath.Join(dir, "creds")
	os.RemoveAll(credDir)
	if len(creds.Files) > 0 {
		if err := os.MkdirAll(credDir, 0o700); err != nil {
			return fmt.Errorf("csi: credentials dir: %w", err)
		}
		for name, b := range creds.Files {
			if err := os.WriteFile(filepath.Join(credDir, name), b, 0o600); err != nil {
				return fmt.Errorf("csi: write credential %s: %w", name, err)
			}
		}
	}
	cacheDir := filepath.Join(n.opts.CacheRoot, spec.CacheKey(creds, n.opts.tierKeyArgs(spec)))
	if holder := cache.LockHolder(cacheDir); holder != "" {
		// Another node-mode mount of the same data, identity and tier
		// with other options (or a rotated secret) is running: this
		// one gets its own cache.
		cacheDir += "-" + filepath.Base(dir)[:8]
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return fmt.Errorf("csi: cache dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cachedir"), []byte(cacheDir), 0o600); err != nil {
		n.log.Warn("csi: recording the cache dir; the last unpublish will not wait for the mount to release it", "dir", cacheDir, "err", err)
	}
	args := []string{"mount", spec.Source, mnt, "--cache-dir", cacheDir, "--allow-other",
		"--log-file", filepath.Join(dir, "strata.log")}
	args = append(append(args, n.opts.tierKeyArgs(spec)...), spec.Args...)
	cmd := exec.CommandContext(ctx, n.opts.StrataBin, args...)
	cmd.Env = append(os.Environ(), creds.Environ(credDir)...)
	// The cache is shared by identity, not by secret: a mount that starts
	// offline (endpoint unreachable, metadataTTL indefinite) checks no
	// secret, so only credentials that passed the backend's check on this
	// cache before may (TestCSINodeCacheNeedsTheBackendsYes). Without a
	// Secret the identity is the node's, the same for every such volume.
	verified := filepath.Join(n.opts.StateDir, "verified", filepath.Base(cacheDir))
	mark := creds.verifier(cacheDir)
	checked := creds.Empty()
	if b, err := os.ReadFile(verified); err == nil && string(b) == mark {
		checked = true
	}
	if !checked {
		cmd.Env = append(cmd.Env, config.OfflineStartEnv+"=never")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return errorf(codes.Internal, "strata mount %s: %v: %s (log: %s)", spec.Source, err,
			strings.TrimSpace(string(out)), filepath.Join(dir, "strata.log"))
	}
	if !checked { // started, and not offline: the backend took these credentials
		err := os.MkdirAll(filepath.Dir(verified), 0o700)
		if err == nil {
			err = os.WriteFile(verified, []byte(mark), 0o600)
		}
		if err != nil {
			n.log.Warn("csi: recording checked credentials; this volume will not start offline", "err", err)
		}
	}
	n.log.Info("csi: shared mount started", "source", spec.Source, "mountpoint", mnt, "cache_dir", cacheDir)
	return nil
}

// unpublish unbinds target if node mode published it; the shared mount
// stops with its last user. handled is false for targets it never saw.
func (n *nodeShares) unpublish(ctx context.Context, target string) (handled bool, err error) {
	dir := n.findTarget(target)
	if dir == "" {
		return false, nil
	}
	defer n.lock(filepath.Base(dir))()
	if err := unmountAll(target); err != nil {
		return true, err
	}
	if err := os.Remove(filepath.Join(dir, "targets", targetHash(target))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("csi: forget target: %w", err)
	}
	if err := removeTarget(target); err != nil {
		return true, err
	}
	n.stopIfUnused(dir)
	return true, nil
}

// findTarget returns the share directory holding target's record.
func (n *nodeShares) findTarget(target string) string {
	h := targetHash(target)
	matches, _ := filepath.Glob(filepath.Join(n.root(), "*", "targets", h))
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(filepath.Dir(matches[0]))
}

// targets lists the recorded users of a share.
func (n *nodeShares) targets(dir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dir, "targets"))
	var out []string
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(dir, "targets", e.Name())); err == nil {
			out = append(out, string(b))
		}
	}
	return out
}

// stopIfUnused unmounts a share nobody uses and waits for its process to
// release the cache (it flushes the index on the way out), so the next
// job's mount finds the cache warm and free.
func (n *nodeShares) stopIfUnused(dir string) {
	if len(n.targets(dir)) > 0 {
		return
	}
	mnt := filepath.Join(dir, "mnt")
	if err := unmountAll(mnt); err != nil {
		n.log.Warn("csi: stopping the shared mount", "mountpoint", mnt, "err", err)
		return
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cachedir")); err == nil {
		deadline := time.Now().Add(30 * time.Second)
		for cache.LockHolder(string(b)) != "" && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	os.RemoveAll(filepath.Join(dir, "creds"))
	os.Remove(mnt)
	n.log.Info("csi: shared mount stopped (last user left)", "mountpoint", mnt)
}

// unsignedTier refuses a node-mode volume that reads through a shared
// cache tier without --shared-cache-key-file: a node-mode cache is shared
// by every volume of the same data, so an unsigned tier would let whoever
// can write the tier bucket choose the bytes other tenants read.
func unsignedTier(spec Spec, driverArgs []string) error {
	args := append(append([]string{}, driverArgs...), spec.Args...)
	if tier, ok := lastFlag(args, "shared-cache"); !ok || tier == "" {
		return nil
	}
	if kf, ok := lastFlag(args, "shared-cache-key-file"); ok && kf != "" && kf != "true" {
		return nil
	}
	return errorf(codes.FailedPrecondition, "csi: %s: a node-mode volume with a shared cache tier needs the driver's "+
		"--mount-arg=--shared-cache-key-file=FILE (the same key on every node): the node's cache is shared "+
		"between volumes, and an unsigned tier lets whoever can write the tier bucket choose what they read", spec.Source)
}

// tierKeyArgs are the driver's mount flags for spec: ExtraMountArgs, and
// --shared-cache-key-file when the volume reads through a shared tier
// (the mount refuses the flag without one).
func (o Options) tierKeyArgs(spec Spec) []string {
	args := append([]string{}, o.ExtraMountArgs...)
	if tier, ok := lastFlag(append(append([]string{}, args...), spec.Args...), "shared-cache"); ok && tier != "" && o.SharedCacheKeyFile != "" {
		args = append(args, "--shared-cache-key-file="+o.SharedCacheKeyFile)
	}
	return args
}
