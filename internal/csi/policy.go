package csi

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stratafs/strata/internal/config"
)

// Who may set what. A volume's attributes come from one of two places:
//
//   - a PersistentVolume, written by the cluster's administrator (or a
//     provisioner): trusted like the driver's own configuration;
//   - an inline ephemeral volume in a pod spec, written by anyone who may
//     create pods in a namespace: a tenant.
//
// Kubelet says which in csi.storage.k8s.io/ephemeral when the CSIDriver
// has podInfoOnMount: true (its value overrides anything the pod spec put
// under that key). Without it the driver cannot tell, and treats the
// volume as inline.
//
// An inline volume may set the tuning options only. What changes where
// the bytes come from or what the node exposes (the endpoint, the shared
// tier, a metrics listener, a control socket) comes from a
// PersistentVolume or from the driver (--mount-arg), and what names files
// on the node (cache dir, log file, profile, key file, config) from the
// driver only. Node mode for an inline volume needs the driver's
// --allow-inline-node-mode.

// AttrEphemeral is set by kubelet (podInfoOnMount): "true" for an inline
// ephemeral volume, "false" for a PersistentVolume.
const AttrEphemeral = podInfoPrefix + "ephemeral"

// errNotAllowed is an option this volume may not set (PermissionDenied).
var errNotAllowed = errors.New("not allowed for this volume")

// Who may set a strata mount flag.
const (
	ScopeVolume = "volume"            // any volume, inline ones too: tuning
	ScopePV     = "persistent-volume" // a PersistentVolume, or the driver
	ScopeDriver = "driver"            // the driver only (--mount-arg)
)

var flagScopes = map[string]string{}

func init() {
	for _, f := range strings.Fields(`cache-size metadata-ttl region force-path-style no-sign-request anonymous
		uid gid file-mode dir-mode log-level log-format block-size memory-limit max-readahead part-size
		small-object random-fill-max lookup-fetch max-fetches read-ahead-kb passthrough io-engine dir-prefetch list-prefetch upload upload-concurrency upload-delay
		upload-part-size rename-dir-limit warm-concurrency warm-on-mount history`) {
		flagScopes[f] = ScopeVolume
	}
	for _, f := range strings.Fields(`endpoint-url shared-cache shared-cache-endpoint-url shared-cache-region
		shared-cache-force-path-style shared-cache-read-only shared-cache-group-size shared-cache-timeout
		shared-cache-write-concurrency shared-cache-write-buffer metrics-addr control-socket`) {
		flagScopes[f] = ScopePV
	}
	for _, f := range strings.Fields(`cache-dir log-file foreground f allow-other key-file profile
		shared-cache-profile shared-cache-key-file config print-config help h read-only`) {
		flagScopes[f] = ScopeDriver
	}
}

// FlagScope says who may set the mount flag name: ScopeVolume,
// ScopePV, ScopeDriver, or "" for a flag the driver does not know (which
// no volume may set).
func FlagScope(name string) string { return flagScopes[name] }

// origin is where a volume's attributes come from.
type origin int

const (
	originPV      origin = iota + 1
	originInline         // csi.storage.k8s.io/ephemeral: "true"
	originUnknown        // no csi.storage.k8s.io/ephemeral: treated as inline
)

func volumeOrigin(attrs map[string]string) (origin, error) {
	v, ok := attrs[AttrEphemeral]
	switch {
	case !ok:
		return originUnknown, nil
	case v == "true":
		return originInline, nil
	case v == "false":
		return originPV, nil
	}
	return 0, fmt.Errorf("%w: %s=%q: want true or false", errBadAttr, AttrEphemeral, v)
}

// inlineWhy ends a refusal of an option for a volume that is (or may be)
// inline.
func (o origin) inlineWhy() string {
	if o == originUnknown {
		return "this volume may be an inline ephemeral volume (kubelet did not set " + AttrEphemeral +
			": the CSIDriver object needs podInfoOnMount: true, as deploy/kubernetes/csidriver.yaml has)"
	}
	return "an inline ephemeral volume may not set it"
}

// checkFlag refuses a mount flag this volume may not set.
func (o origin) checkFlag(source, name string) error {
	switch flagScopes[name] {
	case ScopeVolume:
		return nil
	case ScopePV:
		if o == originPV {
			return nil
		}
		return fmt.Errorf("%w: %s: --%s changes where the volume's bytes come from or what the node exposes; %s: "+
			"set it in a PersistentVolume, or on the driver with --mount-arg", errNotAllowed, source, name, o.inlineWhy())
	case ScopeDriver:
		if name == "read-only" {
			return fmt.Errorf("%w: %s: --%s: use the %s volume attribute (or a read-only volume mount)", errNotAllowed, source, name, AttrReadOnly)
		}
		return fmt.Errorf("%w: %s: --%s is set by the driver, not by a volume (it names files on the node or "+
			"runs the mount); a cluster admin can set it with the driver's --mount-arg", errNotAllowed, source, name)
	}
	return fmt.Errorf("%w: %s: --%s is not a mount option a volume may set (known: %s)", errBadAttr, source, name,
		strings.Join(volumeFlags(o), ", "))
}

// volumeFlags lists what a volume of origin o may set, for messages.
func volumeFlags(o origin) []string {
	var out []string
	for _, f := range sortedKeys(flagScopes) {
		if s := flagScopes[f]; s == ScopeVolume || (s == ScopePV && o == originPV) {
			out = append(out, f)
		}
	}
	return out
}

// checkInlineNodeMode refuses node mode for a volume that is (or may be)
// inline unless the driver allows it: a node-mode mount runs in the
// privileged plugin and its cache outlives the pod.
func (s Spec) checkInlineNodeMode(allowed bool) error {
	if s.Mode != ModeNode || s.origin == originPV {
		return nil
	}
	if allowed {
		return s.checkInlineNodeSource()
	}
	return fmt.Errorf("%w: %s=%s: %s, because the driver was deployed without --allow-inline-node-mode; "+
		"use a PersistentVolume, or sidecar mode", errNotAllowed, AttrMode, ModeNode, s.origin.inlineWhy())
}

// checkInlineNodeSource refuses a file:// source for an inline node-mode
// volume: the mount runs in the privileged plugin, so the directory is
// the node's as the plugin sees it (kubelet's pods with every pod's
// Secrets, the plugin's state), bind-mounted into the tenant's pod
// (TestCSIInlineNodeModeFileSource). Where the bytes come from is the
// admin's to say, as for endpointURL; in sidecar mode the directory is
// the pod's own.
func (s Spec) checkInlineNodeSource() error {
	src, err := config.ParseSource(s.Source)
	if err != nil || src.Scheme != "file" {
		return nil // not a file:// source (the mount refuses what does not parse)
	}
	return fmt.Errorf("%w: %s=%q: a file:// source in node mode reads the node's files as the privileged plugin sees them; "+
		"%s: use a PersistentVolume, or sidecar mode", errNotAllowed, AttrSource, s.Source, s.origin.inlineWhy())
}

// checkInlineIdentity refuses an inline node-mode volume that would read
// with the node's identity: without a Secret a node-mode mount uses what
// the privileged plugin finds (its instance role, service account or
// credential files), which a pod author must not borrow
// (TestCSIInlineNodeModeNodeIdentity). Anonymous reads, and an identity
// the driver's own --mount-arg chose for every volume (--profile,
// --key-file), are not the node's ambient one.
func (s Spec) checkInlineIdentity(c Credentials, driverArgs []string) error {
	if s.Mode != ModeNode || s.origin == originPV || c.namesIdentity(s.Source) {
		return nil
	}
	args := append(append([]string{}, driverArgs...), s.Args...)
	for _, f := range []string{"no-sign-request", "anonymous"} {
		if v, ok := lastFlag(args, f); ok && v != "false" {
			return nil
		}
	}
	for _, f := range []string{"profile", "key-file"} {
		if v, ok := lastFlag(driverArgs, f); ok && v != "" {
			return nil
		}
	}
	return fmt.Errorf("%w: a node-mode volume without a Secret naming its identity (for s3:// both AWS_ACCESS_KEY_ID and "+
		"AWS_SECRET_ACCESS_KEY, for gs:// %s) reads with the node's identity; %s: "+
		"give it such a Secret (nodePublishSecretRef), read anonymously (mountOptions: no-sign-request), "+
		"or use a PersistentVolume or sidecar mode", errNotAllowed, GCSKeyFile, s.origin.inlineWhy())
}

// namesIdentity reports whether the Secret alone says whom a mount of
// source reads as. A partial one does not: the AWS SDK takes keys from the
// environment only when both the id and the secret are there, and the GCS
// client ignores AWS keys; either then falls back to the node's identity.
func (c Credentials) namesIdentity(source string) bool {
	src, err := config.ParseSource(source)
	switch {
	case err != nil:
		return false
	case src.Scheme == "s3":
		return c.Env["AWS_ACCESS_KEY_ID"] != "" && c.Env["AWS_SECRET_ACCESS_KEY"] != ""
	case src.Scheme == "gs":
		return len(c.Files[GCSKeyFile]) > 0
	}
	return true // file://: no identity
}

// ScopedFlags lists every flag FlagScope knows.
func ScopedFlags() []string { return sortedKeys(flagScopes) }

// nodeKeyFileTypes are the Google credentials file types a node-mode
// volume's key.json may have: a key that carries its own secret and
// names nothing on the node. The others are instructions to the auth
// library run with the privileged plugin's files and network: an
// external_account reads the file or URL its credential_source names
// (any file of the node, the node's metadata server) and sends it to its
// token_url; an impersonated_service_account nests one. A sidecar-mode
// mount runs in the pod, where they read the pod's own (workload identity
// federation), so it takes every type.
var nodeKeyFileTypes = []string{"service_account", "authorized_user"}

// googleTokenURLs are the token endpoints Google's keys name.
var googleTokenURLs = []string{"https://oauth2.googleapis.com/token", "https://accounts.google.com/o/oauth2/token",
	"https://www.googleapis.com/oauth2/v4/token"}

// checkNodeKeyFile refuses a key.json a node-mode mount must not load
// (TestCSINodeModeKeyFileReadsNoNodeFile).
func (c Credentials) checkNodeKeyFile() error {
	b, ok := c.Files[GCSKeyFile]
	if !ok {
		return nil
	}
	var k struct {
		Type     string `json:"type"`
		TokenURI string `json:"token_uri"`
		TokenURL string `json:"token_url"`
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return fmt.Errorf("%w: key %q is not a JSON credentials file", errBadSecret, GCSKeyFile)
	}
	if !slices.Contains(nodeKeyFileTypes, k.Type) {
		return fmt.Errorf("%w: key %q: type %q is not allowed in node mode (want %s): it makes the privileged mount read "+
			"files or URLs of the node and send them elsewhere; use a service-account key, or sidecar mode",
			errBadSecret, GCSKeyFile, k.Type, strings.Join(nodeKeyFileTypes, " or "))
	}
	// The token request leaves from the plugin, on the node's network,
	// and the answer's body comes back in the publish error: a token_uri
	// of the tenant's choosing is a request to any address the node
	// reaches (TestCSINodeModeKeyFileTokenURI).
	for _, u := range []string{k.TokenURI, k.TokenURL} {
		if u != "" && !slices.Contains(googleTokenURLs, u) {
			return fmt.Errorf("%w: key %q: its token_uri is not Google's token endpoint (want %s): in node mode "+
				"the request would leave from the node", errBadSecret, GCSKeyFile, strings.Join(googleTokenURLs, " or "))
		}
	}
	return nil
}
