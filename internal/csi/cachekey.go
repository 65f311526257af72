package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// A node-mode cache directory outlives the mounts that use it: the next
// job on the node finds it warm. So it is shared only between volumes that
// would read the same bytes with the same authority. Its key is:
//
//   - the source (bucket and prefix) and the endpoint it is read from;
//   - the identity the bytes are read as: the access key id, the GCS key
//     file's service account and key id, the driver's profile or key file,
//     anonymous access, or the driver's own ambient identity. An identity,
//     never a secret: a rotated secret or session token of the same
//     identity keeps the cache warm, and a mount whose secret is wrong
//     fails its credentials check before it serves anything;
//   - the shared tier (URL and endpoint), since blocks can enter the
//     local cache from it;
//   - the block size, which is fixed per cache directory.
//
// Other options (metadata TTL, memory, uid, ...) do not change the bytes;
// volumes differing only in them share the cache (not the mount: ShareKey
// covers everything).

// cacheKeyFlags are the mount flags that are part of the cache key; the
// last occurrence wins, as it does for the mount's own flag parser.
var cacheKeyFlags = []string{"endpoint-url", "profile", "key-file", "no-sign-request", "anonymous",
	"shared-cache", "shared-cache-endpoint-url", "shared-cache-profile", "shared-cache-key-file", "block-size"}

// CacheKey names the node-mode cache directory of a volume with these
// credentials, mounted with the driver's extra mount flags before its own.
func (s Spec) CacheKey(c Credentials, driverArgs []string) string {
	args := append(append([]string{}, driverArgs...), s.Args...)
	h := sha256.New()
	fmt.Fprintf(h, "source=%s\x00", s.Source)
	for _, name := range cacheKeyFlags {
		if v, ok := lastFlag(args, name); ok {
			fmt.Fprintf(h, "%s=%s\x00", name, v)
		}
	}
	fmt.Fprintf(h, "identity=%s\x00", c.Identity())
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// Identity names whom the credentials authenticate as, without anything
// that would let one authenticate: AWS_ACCESS_KEY_ID, and for a GCS key
// file its type, service account (or client id) and key id. A key file
// carrying none of these is named by a hash of its content. Empty
// credentials are the ambient identity (the plugin's or the pod's).
func (c Credentials) Identity() string {
	var parts []string
	// The AWS SDK reads keys from the environment only when both the id
	// and the secret are there; an id alone leaves the mount on the
	// node's identity, and naming it by the id would give it the cache of
	// the id's owner (TestIdentityOfAKeyIDAlone).
	if id := c.Env["AWS_ACCESS_KEY_ID"]; id != "" && c.Env["AWS_SECRET_ACCESS_KEY"] != "" {
		parts = append(parts, "aws:"+id)
	}
	if b, ok := c.Files[GCSKeyFile]; ok {
		parts = append(parts, "gcs:"+keyFileIdentity(b))
	}
	if len(parts) == 0 {
		return "ambient"
	}
	return strings.Join(parts, ",")
}

// keyFileIdentity names a Google credentials file by the fields that
// identify it and are not secret.
func keyFileIdentity(b []byte) string {
	var k struct {
		Type         string `json:"type"`
		ClientEmail  string `json:"client_email"`
		ClientID     string `json:"client_id"`
		PrivateKeyID string `json:"private_key_id"`
		Audience     string `json:"audience"` // external_account (workload identity federation)
	}
	// A client id alone names no one: gcloud's user credentials
	// (authorized_user) all carry gcloud's own OAuth client id, so two
	// users' keys would share a cache (TestIdentityOfUserCredentials).
	// Those are named by the content's hash, like any key without a
	// service account or an audience.
	if json.Unmarshal(b, &k) == nil && (k.ClientEmail != "" || k.Audience != "") {
		return strings.Join([]string{k.Type, k.ClientEmail, k.ClientID, k.PrivateKeyID, k.Audience}, "/")
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// lastFlag returns the value of the last --name in args ("--name=v", or
// "--name v" when v is not itself a flag, or "true" for a bare --name).
func lastFlag(args []string, name string) (string, bool) {
	val, found := "", false
	for i, a := range args {
		rest, ok := strings.CutPrefix(a, "--"+name)
		switch {
		case !ok:
			continue
		case strings.HasPrefix(rest, "="):
			val, found = rest[1:], true
		case rest == "" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
			val, found = args[i+1], true
		case rest == "":
			val, found = "true", true
		}
	}
	return val, found
}

// verifier names these exact credentials (secret values included) for
// the cache directory dir, as a salted hash: what the plugin records once
// they passed the backend's check on that cache, so that only they may
// later start a mount offline on it (nodemode.go).
func (c Credentials) verifier(dir string) string {
	h := sha256.New()
	fmt.Fprintf(h, "strata-csi-verified\x00%s\x00", dir)
	for _, k := range sortedKeys(c.Env) {
		fmt.Fprintf(h, "%s=%s\x00", k, c.Env[k])
	}
	for _, k := range sortedKeys(c.Files) {
		fmt.Fprintf(h, "%s=%x\x00", k, sha256.Sum256(c.Files[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}
