package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// NodePublishVolume mounts the volume at the target path: a FUSE mount
// handed to the pod's sidecar, or a bind of the node's shared mount.
// Publishing a target that is already mounted succeeds at once.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if err := checkVolumeTarget(req.GetVolumeId(), target); err != nil {
		return nil, err
	}
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	readOnly := req.GetReadonly() || readerOnly(req.GetVolumeCapability().GetAccessMode().GetMode())
	spec, err := ParseSpec(req.GetVolumeContext(), readOnly)
	if err != nil {
		return nil, attrError(err)
	}
	// A PV's spec.mountOptions arrive as mount flags: strata flags, like
	// the mountOptions attribute.
	flags, err := parseMountOptions("spec.mountOptions", strings.Join(req.GetVolumeCapability().GetMount().GetMountFlags(), ","), spec.origin)
	if err != nil {
		return nil, attrError(err)
	}
	spec.Args = append(spec.Args, flags...)
	if err := spec.checkInlineNodeMode(d.opts.AllowInlineNodeMode); err != nil {
		return nil, attrError(err)
	}
	creds, err := ParseSecrets(req.GetSecrets())
	if err != nil {
		return nil, attrError(err)
	}
	if spec.Mode == ModeNode {
		if err := creds.checkNodeKeyFile(); err != nil {
			return nil, attrError(err)
		}
	}
	if err := spec.checkInlineIdentity(creds, d.opts.ExtraMountArgs); err != nil {
		return nil, attrError(err)
	}
	if d.opts.ValidateArgs != nil {
		if err := d.opts.ValidateArgs(spec.Args); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume attributes: %v", err)
		}
	}
	target = filepath.Clean(target)
	if !d.lockTarget(target) {
		return nil, status.Errorf(codes.Aborted, "an operation on %s is already in progress", target)
	}
	defer d.unlockTarget(target)

	// Never stat a mounted target: a sidecar-mode mount whose sidecar has
	// not started yet blocks every access until it answers FUSE_INIT.
	mounted, err := isMounted(target)
	if err != nil {
		return nil, grpcError(err)
	}
	if !mounted {
		if err := os.MkdirAll(target, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, status.Errorf(codes.Internal, "create target %s: %v", target, err)
		}
	}
	d.mu.Lock()
	_, sidecarMode := d.sidecars[target]
	d.mu.Unlock()
	if (spec.Mode == ModeNode && sidecarMode) || (spec.Mode == ModeSidecar && d.shares.findTarget(target) != "") {
		return nil, status.Errorf(codes.AlreadyExists, "%s is already published in the other mode", target)
	}
	switch spec.Mode {
	case ModeNode:
		err = d.shares.publish(ctx, req.GetVolumeId(), target, spec, creds)
	default:
		err = d.publishSidecar(req.GetVolumeId(), target, spec, creds)
	}
	if err != nil {
		return nil, grpcError(err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target and removes it. A target that
// is gone or was never mounted is fine (the call is idempotent).
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if err := checkVolumeTarget(req.GetVolumeId(), target); err != nil {
		return nil, err
	}
	target = filepath.Clean(target)
	if !d.lockTarget(target) {
		return nil, status.Errorf(codes.Aborted, "an operation on %s is already in progress", target)
	}
	defer d.unlockTarget(target)

	if handled, err := d.shares.unpublish(ctx, target); handled || err != nil {
		if err != nil {
			return nil, grpcError(err)
		}
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if err := d.unpublishSidecar(target); err != nil {
		return nil, grpcError(err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// checkCapability accepts filesystem volumes of any access mode; raw
// block is not something a FUSE filesystem can be.
func checkCapability(c *csi.VolumeCapability) error {
	if c.GetBlock() != nil {
		return status.Error(codes.InvalidArgument, "block volumes are not supported: Strata is a filesystem")
	}
	if c.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume capability needs access type mount")
	}
	if fs := c.GetMount().GetFsType(); fs != "" && fs != "fuse" && fs != "fuse.strata" && fs != "strata" {
		return status.Errorf(codes.InvalidArgument, "fsType %q: Strata mounts fuse.strata", fs)
	}
	if c.GetAccessMode() == nil {
		return status.Error(codes.InvalidArgument, "volume capability needs an access mode")
	}
	if c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
		return status.Error(codes.InvalidArgument, "access mode UNKNOWN")
	}
	return nil
}

func readerOnly(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		m == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}

// errorf is an error carrying a gRPC code.
func errorf(c codes.Code, format string, a ...any) error {
	return status.Error(c, fmt.Sprintf(format, a...))
}

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(ctx context.Context, _ *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	v := d.opts.Version
	if v == "" {
		v = "dev"
	}
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: v}, nil
}

// GetPluginCapabilities reports a node-only plugin: no CONTROLLER_SERVICE
// (nothing to provision or attach) and no topology constraints.
func (d *Driver) GetPluginCapabilities(ctx context.Context, _ *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe reports readiness once the plugin serves.
func (d *Driver) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	d.mu.Lock()
	ready := d.ready
	d.mu.Unlock()
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(ready)}, nil
}

// controllerShim answers ControllerGetCapabilities only. The plugin does
// not advertise CONTROLLER_SERVICE; csi-sanity v5.4 still asks every
// driver for controller capabilities before its Node tests and fails on
// an empty answer, so this returns the neutral RPC_UNKNOWN (as
// mountpoint-s3-csi-driver does). Every other Controller RPC is
// Unimplemented.
type controllerShim struct {
	csi.UnimplementedControllerServer
}

func (controllerShim) ControllerGetCapabilities(ctx context.Context, _ *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_UNKNOWN,
		}},
	}}}, nil
}

// NodeGetCapabilities: publish/unpublish only (no staging, no stats).
func (d *Driver) NodeGetCapabilities(ctx context.Context, _ *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodeGetInfo names the node; there is no volume limit and no topology.
func (d *Driver) NodeGetInfo(ctx context.Context, _ *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.opts.NodeID}, nil
}

// attrError is the gRPC error for a volume's attributes, secrets or
// mount options: PermissionDenied for what this volume may not set,
// InvalidArgument for the rest.
func attrError(err error) error {
	if errors.Is(err, errNotAllowed) {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// Codes for errors from this package.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// checkVolumeTarget validates what every node call names: a volume id and
// an absolute target path.
func checkVolumeTarget(volumeID, target string) error {
	switch {
	case volumeID == "":
		return status.Error(codes.InvalidArgument, "volume id is required")
	case target == "":
		return status.Error(codes.InvalidArgument, "target path is required")
	case !filepath.IsAbs(target):
		return status.Errorf(codes.InvalidArgument, "target path %q is not absolute", target)
	}
	return nil
}
