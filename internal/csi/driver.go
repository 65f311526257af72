package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/stratafs/strata/internal/config"
)

// DriverName is the CSI driver name (CSIDriver object, PV spec.csi.driver).
const DriverName = "strata.csi.stratafs.io"

// Options configure the node plugin.
type Options struct {
	NodeID  string
	Version string
	// StrataBin is the strata binary node mode runs (default: this one).
	StrataBin string
	// CacheRoot holds node-mode caches, one directory per dataset; put it
	// on the node's NVMe.
	CacheRoot string
	// StateDir holds node-mode shared mounts and their users.
	StateDir string
	// HandoffTimeout closes a sidecar-mode hand-off nobody picked up,
	// which turns the target into a dead mount (ENOTCONN), not a hang.
	HandoffTimeout time.Duration
	// ValidateArgs checks `strata mount` flags before anything is
	// mounted (the command's own parser); nil accepts everything.
	ValidateArgs func(args []string) error
	// ExtraMountArgs are added to every node-mode mount (e.g. the
	// --endpoint-url of an in-cluster store).
	ExtraMountArgs []string
	// SharedCacheKeyFile signs and verifies the shared cache tier of
	// node-mode volumes that use one (--shared-cache-key-file, added to
	// those mounts only); without it such volumes are refused.
	SharedCacheKeyFile string
	// AllowInlineNodeMode lets inline ephemeral volumes (written by
	// whoever may create a pod) ask for node mode: a mount run by the
	// privileged plugin whose cache outlives the pod. Off by default.
	AllowInlineNodeMode bool
	Logger              *slog.Logger
}

// DefaultOptions are the DaemonSet's defaults, from config.CSI.
func DefaultOptions() Options {
	d := config.CSI()
	return Options{
		CacheRoot:      d.CacheRoot,
		StateDir:       d.StateDir,
		HandoffTimeout: d.HandoffTimeout,
		Logger:         slog.Default(),
	}
}

// Driver implements the CSI Identity and Node services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	busy     map[string]bool        // targets with an RPC in flight
	sidecars map[string]*sidecarVol // sidecar mode, by target
	shares   *nodeShares            // node mode
	ready    bool
}

// New returns a driver; Serve makes it reachable.
func New(opts Options) (*Driver, error) {
	if opts.NodeID == "" {
		return nil, errors.New("csi: a node id is required (--node-id, usually spec.nodeName)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StrataBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("csi: find the strata binary: %w", err)
		}
		opts.StrataBin = exe
	}
	if opts.HandoffTimeout <= 0 {
		opts.HandoffTimeout = time.Hour
	}
	d := &Driver{opts: opts, log: opts.Logger, busy: map[string]bool{}, sidecars: map[string]*sidecarVol{}}
	d.shares = newNodeShares(opts, opts.Logger)
	return d, nil
}

// ParseEndpoint accepts unix:///path, unix://path, unix:path or a path.
func ParseEndpoint(ep string) (string, error) {
	p := ep
	for _, pre := range []string{"unix://", "unix:"} {
		if rest, ok := strings.CutPrefix(ep, pre); ok {
			p = rest
			break
		}
	}
	if strings.Contains(p, "://") || p == "" {
		return "", fmt.Errorf("csi: endpoint %q: want unix:///path/csi.sock", ep)
	}
	return filepath.Clean(p), nil
}

// Serve listens on endpoint and serves until ctx ends; it then stops
// taking calls, lets running ones finish, and closes hand-offs.
func (d *Driver) Serve(ctx context.Context, endpoint string) error {
	p, err := ParseEndpoint(endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("csi: endpoint dir: %w", err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("csi: remove stale endpoint: %w", err)
	}
	l, err := net.Listen("unix", p)
	if err != nil {
		return fmt.Errorf("csi: listen %s: %w", p, err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(d.logCalls))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	csi.RegisterControllerServer(srv, controllerShim{})
	d.mu.Lock()
	d.ready = true
	d.mu.Unlock()
	d.log.Info("csi: serving", "endpoint", p, "driver", DriverName, "node", d.opts.NodeID, "version", d.opts.Version)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		srv.GracefulStop()
		err = <-errc
	}
	d.closeHandoffs()
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	return err
}

// logCalls logs each call's method, duration and error; never a request,
// which may carry secrets.
func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	attrs := []any{"method", info.FullMethod, "took", time.Since(start).Round(time.Millisecond).String()}
	if v, ok := req.(interface{ GetVolumeId() string }); ok && v.GetVolumeId() != "" {
		attrs = append(attrs, "volume", v.GetVolumeId())
	}
	if v, ok := req.(interface{ GetTargetPath() string }); ok && v.GetTargetPath() != "" {
		attrs = append(attrs, "target", v.GetTargetPath())
	}
	if err != nil {
		d.log.Warn("csi: call failed", append(attrs, "err", err)...)
	} else if !strings.Contains(info.FullMethod, "Probe") && !strings.Contains(info.FullMethod, "Get") {
		d.log.Info("csi: call", attrs...)
	}
	return resp, err
}

// lockTarget takes the per-target operation lock, or reports that
// another operation holds it.
func (d *Driver) lockTarget(target string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[target] {
		return false
	}
	d.busy[target] = true
	return true
}

func (d *Driver) unlockTarget(target string) {
	d.mu.Lock()
	delete(d.busy, target)
	d.mu.Unlock()
}
