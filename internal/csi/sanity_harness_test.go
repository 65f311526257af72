package csi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sanityIdentity is the plugin's Identity service, advertising the
// harness's stand-in Controller so csi-sanity creates the volumes its
// Node specs publish.
type sanityIdentity struct{ *Driver }

func (sanityIdentity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

// sanityNode is the plugin's Node service, checking that each successful
// NodePublishVolume left a readable Strata mount at the target (a
// positive publish that mounted nothing would otherwise pass).
type sanityNode struct {
	*Driver
	want map[string]string // file under the target -> content
}

func (n sanityNode) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	resp, err := n.Driver.NodePublishVolume(ctx, req)
	if err != nil {
		return resp, err
	}
	m, ok, err := findMount(req.GetTargetPath())
	if err != nil || !ok || m.FSType != "fuse.strata" {
		return nil, status.Errorf(codes.Internal, "harness: NodePublishVolume succeeded but %s is not a Strata mount (%+v, %v)", req.GetTargetPath(), m, err)
	}
	for name, content := range n.want {
		b, err := os.ReadFile(filepath.Join(req.GetTargetPath(), name))
		if err != nil || string(b) != content {
			return nil, status.Errorf(codes.Internal, "harness: %s through the target: %q, %v; want %q", name, b, err, content)
		}
	}
	return resp, nil
}

// sanityController stands in for the admin of a statically provisioned
// driver: "creating" a volume returns the attributes of a node-mode
// PersistentVolume of source, as kubelet passes them (podInfoOnMount).
type sanityController struct {
	csi.UnimplementedControllerServer
	source string

	mu   sync.Mutex
	vols map[string]bool
}

func (c *sanityController) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		}},
	}}}, nil
}

func (c *sanityController) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	c.mu.Lock()
	if c.vols == nil {
		c.vols = map[string]bool{}
	}
	c.vols[req.GetName()] = true
	c.mu.Unlock()
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      req.GetName(),
		CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext: map[string]string{AttrSource: c.source, AttrMode: ModeNode, AttrEphemeral: "false",
			AttrMetadataTTL: "indefinite"},
	}}, nil
}

func (c *sanityController) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	c.mu.Lock()
	delete(c.vols, req.GetVolumeId())
	c.mu.Unlock()
	return &csi.DeleteVolumeResponse{}, nil
}

// mountsUnder lists the mounts below dir, deepest first.
func mountsUnder(dir string) []string {
	all, _ := readMountinfo()
	var out []string
	for _, m := range all {
		if strings.HasPrefix(m.Mountpoint, dir+string(os.PathSeparator)) {
			out = append([]string{m.Mountpoint}, out...)
		}
	}
	return out
}

// TestPluginCapabilities: the plugin itself advertises no Controller
// service (static provisioning; the harness's Controller is csi-sanity's
// alone) and no Node capabilities (no staging, stats or expansion).
func TestPluginCapabilities(t *testing.T) {
	d, err := New(Options{NodeID: "n", StrataBin: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := d.GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
	if err != nil || len(pc.GetCapabilities()) != 0 {
		t.Errorf("GetPluginCapabilities = %v, %v; want none", pc, err)
	}
	nc, err := d.NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{})
	if err != nil || len(nc.GetCapabilities()) != 0 {
		t.Errorf("NodeGetCapabilities = %v, %v; want none", nc, err)
	}
}
