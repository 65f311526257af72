package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

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
