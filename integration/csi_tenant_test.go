package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratafs/strata/internal/testserver"
)

// Tests of the tenant model of the CSI driver: who may set what, and
// which volumes share a node-mode cache.

// TestCSINodeCacheTenancy: node-mode volumes share a cache directory only
// when they read the same bytes with the same authority. Options that do
// not change the bytes (metadata TTL) share it; a shared tier or another
// identity (temporary credentials of an STS session) gets its own, also
// when the earlier mount has stopped and its cache is free.
func TestCSINodeCacheTenancy(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "node")
	m := vol.srv.m
	tier := vol.srv.newBucket(t)
	// A node-mode cache is shared between tenants, so the driver signs
	// the shared tier; one without a key refuses tiered volumes.
	keyFile := filepath.Join(t.TempDir(), "tier.key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startCSIIn(t, t.TempDir(), "--shared-cache-key-file", keyFile)
	kubelet := t.TempDir()

	with := func(kv ...string) map[string]string {
		attrs := map[string]string{}
		for k, v := range vol.attrs {
			attrs[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			attrs[kv[i]] = kv[i+1]
		}
		return attrs
	}
	tiered := "force-path-style,shared-cache=s3://" + tier + "/nodes,shared-cache-endpoint-url=" + m.Endpoint +
		",shared-cache-force-path-style,shared-cache-region=" + m.Region
	key, secret, token := assumeRole(t, m)
	session := map[string]string{"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token}

	// run publishes one pod's volume, reads it all, unpublishes it and
	// returns the cache directory its node-mode mount used.
	n := 0
	run := func(what string, attrs, secrets map[string]string) string {
		t.Helper()
		n++
		target, _ := podTarget(t, kubelet, "pod-"+strings.Repeat("x", n), "data")
		if err := p.publish(publishReq("vol-"+what, target, attrs, secrets)); err != nil {
			t.Fatalf("%s: NodePublishVolume: %v", what, err)
		}
		if d := diffTrees(vol.want, tree(t, target)); d != "" {
			t.Fatalf("%s: reads differ from the bucket:\n%s", what, d)
		}
		dir := shareCacheDir(t, p, target)
		if err := p.unpublish("vol-"+what, target); err != nil {
			t.Fatalf("%s: NodeUnpublishVolume: %v", what, err)
		}
		return dir
	}

	unsigned := startCSI(t)
	target, _ := podTarget(t, kubelet, "pod-unsigned", "data")
	err := unsigned.publish(publishReq("vol-unsigned", target, with("mountOptions", tiered), vol.secrets))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--shared-cache-key-file") {
		t.Errorf("a tiered node-mode volume on a driver without a tier key: %v, want FailedPrecondition naming --shared-cache-key-file", err)
	}
	unsigned.stop()

	first := run("first", vol.attrs, vol.secrets)
	if got := run("other-ttl", with("metadataTTL", "1h"), vol.secrets); got != first {
		t.Errorf("a volume differing only in its metadata TTL uses cache %s, want the first one's %s", got, first)
	}
	withTier := run("tier", with("mountOptions", tiered), vol.secrets)
	if withTier == first {
		t.Errorf("a volume with a shared tier uses the cache of the same source without one (%s)", first)
	}
	if got := run("tier-again", with("mountOptions", tiered, "metadataTTL", "1h"), vol.secrets); got != withTier {
		t.Errorf("the same source and tier use cache %s, want %s", got, withTier)
	}
	other := run("other-identity", vol.attrs, session)
	if other == first || other == withTier {
		t.Errorf("a volume read with other credentials uses cache %s (first %s, tier %s)", other, first, withTier)
	}
	caches, _ := filepath.Glob(filepath.Join(p.dir, "cache", "*"))
	if len(caches) != 3 {
		t.Errorf("cache dirs %v, want 3 (one per source, identity and tier)", caches)
	}
}

// shareCacheDir returns the cache directory of the node-mode mount that
// target is a bind of (from the plugin's state directory).
func shareCacheDir(t *testing.T, p *csiPlugin, target string) string {
	t.Helper()
	records, _ := filepath.Glob(filepath.Join(p.dir, "state", "node", "*", "targets", "*"))
	for _, r := range records {
		if b, err := os.ReadFile(r); err == nil && string(b) == target {
			dir, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(r)), "cachedir"))
			if err != nil {
				t.Fatal(err)
			}
			return string(dir)
		}
	}
	t.Fatalf("no node-mode share records %s", target)
	return ""
}

// assumeRole asks MinIO's STS for temporary credentials of its root user:
// another access key id (and a session token) with the same authority.
func assumeRole(t *testing.T, m *testserver.MinIO) (key, secret, token string) {
	t.Helper()
	form := url.Values{"Action": {"AssumeRole"}, "Version": {"2011-06-15"}, "DurationSeconds": {"3600"}}
	body := form.Encode()
	req, err := http.NewRequest(http.MethodPost, m.Endpoint+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: m.AccessKey, SecretAccessKey: m.SecretKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sts", m.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("STS AssumeRole: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("STS AssumeRole: %s: %s", resp.Status, raw)
	}
	var r struct {
		Creds struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
		} `xml:"AssumeRoleResult>Credentials"`
	}
	if err := xml.Unmarshal(raw, &r); err != nil || r.Creds.AccessKeyID == "" || r.Creds.AccessKeyID == m.AccessKey {
		t.Fatalf("STS AssumeRole answer %s: %v", raw, err)
	}
	return r.Creds.AccessKeyID, r.Creds.SecretAccessKey, r.Creds.SessionToken
}

// TestCSIInlineVolumePolicy: an inline ephemeral volume (any pod author)
// may not set what changes where the bytes come from, nor ask for node
// mode unless the driver allows it; each refusal is PermissionDenied and
// names the option, and nothing is mounted. The endpoint may come from the
// driver's own --mount-arg instead.
func TestCSIInlineVolumePolicy(t *testing.T) {
	requireFUSE(t)
	vol := newCSIVolume(t, "node")
	m := vol.srv.m
	p := startCSI(t)
	kubelet := t.TempDir()
	inline := func(kv ...string) map[string]string {
		attrs := map[string]string{}
		for k, v := range vol.attrs {
			attrs[k] = v
		}
		attrs["csi.storage.k8s.io/ephemeral"] = "true"
		delete(attrs, "endpointURL")
		for i := 0; i+1 < len(kv); i += 2 {
			attrs[kv[i]] = kv[i+1]
		}
		return attrs
	}
	for i, tc := range []struct {
		attrs map[string]string
		names string
	}{
		{inline("mode", "sidecar", "endpointURL", "http://attacker.example:9000"), "endpointURL"},
		{inline("mode", "sidecar", "mountOptions", "force-path-style,shared-cache=s3://attacker-tier"), "--shared-cache"},
		{inline("mode", "sidecar", "mountOptions", "endpoint-url=http://attacker.example:9000"), "--endpoint-url"},
		{inline("mode", "sidecar", "mountOptions", "key-file=/var/lib/kubelet/pki/kubelet.key"), "--key-file"},
		{inline(), "--allow-inline-node-mode"},
	} {
		target, _ := podTarget(t, kubelet, "tenant-"+strings.Repeat("x", i+1), "data")
		err := p.publish(publishReq("csi-inline", target, tc.attrs, vol.secrets))
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("inline volume %v: %v, want PermissionDenied naming %s", tc.attrs, err, tc.names)
		}
		if fs, _ := csiMountAt(target); fs != "" {
			t.Errorf("a refused volume left %s mounted at %s", fs, target)
		}
	}
	if shares, _ := filepath.Glob(filepath.Join(p.dir, "state", "node", "*", "mnt")); len(shares) != 0 {
		t.Errorf("refused volumes started node-mode mounts: %v", shares)
	}

	// A driver deployed with inline node mode on, and the endpoint in its
	// own configuration, serves the same inline volume.
	p.stop()
	p = startCSIIn(t, t.TempDir(), "--allow-inline-node-mode", "--mount-arg=--endpoint-url="+m.Endpoint,
		"--mount-arg=--force-path-style", "--mount-arg=--region="+m.Region)
	target, _ := podTarget(t, kubelet, "tenant-ok", "data")
	if err := p.publish(publishReq("csi-inline", target, inline(), vol.secrets)); err != nil {
		t.Fatalf("inline node-mode volume on a driver that allows it: %v", err)
	}
	if d := diffTrees(vol.want, tree(t, target)); d != "" {
		t.Fatalf("inline node-mode reads differ from the bucket:\n%s", d)
	}
	if err := p.unpublish("csi-inline", target); err != nil {
		t.Fatal(err)
	}
}

// TestCSISecretAllowlist: a Secret carries credentials only. One with
// HTTPS_PROXY (or another setting of the process) is refused with
// InvalidArgument naming the key and not its value, in both modes, before
// anything is mounted or any request goes through the proxy.
func TestCSISecretAllowlist(t *testing.T) {
	requireFUSE(t)
	proxied := make(chan struct{}, 1)
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case proxied <- struct{}{}:
		default:
		}
		http.Error(w, "no", http.StatusForbidden)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = proxy.Serve(l) }()
	t.Cleanup(func() { proxy.Close() })
	proxyURL := "http://" + l.Addr().String()

	vol := newCSIVolume(t, "node")
	p := startCSI(t)
	kubelet := t.TempDir()
	for i, tc := range []struct {
		mode, key, value string
	}{
		{"node", "HTTPS_PROXY", proxyURL},
		{"sidecar", "HTTPS_PROXY", proxyURL},
		{"node", "HTTP_PROXY", proxyURL},
		{"node", "AWS_CONFIG_FILE", "/root/.aws/config"},
		{"node", "STRATA_PPROF", "127.0.0.1:0"},
	} {
		attrs := map[string]string{}
		for k, v := range vol.attrs {
			attrs[k] = v
		}
		attrs["mode"] = tc.mode
		secrets := map[string]string{tc.key: tc.value}
		for k, v := range vol.secrets {
			secrets[k] = v
		}
		target, _ := podTarget(t, kubelet, "pod-"+strings.Repeat("s", i+1), "data")
		err := p.publish(publishReq("vol-secret", target, attrs, secrets))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"`+tc.key+`"`) ||
			strings.Contains(err.Error(), tc.value) || strings.Contains(err.Error(), vol.secrets["AWS_SECRET_ACCESS_KEY"]) {
			t.Errorf("%s mode, secret with %s: %v; want InvalidArgument naming the key and not the values", tc.mode, tc.key, err)
		}
		if fs, _ := csiMountAt(target); fs != "" {
			t.Errorf("%s mode, secret with %s: %s mounted at the target", tc.mode, tc.key, fs)
		}
	}
	select {
	case <-proxied:
		t.Error("a request went through the proxy a refused secret named")
	default:
	}
}
