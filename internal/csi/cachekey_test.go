package csi

import (
	"strings"
	"testing"
)

func TestShareKey(t *testing.T) {
	a, _ := ParseSpec(map[string]string{AttrSource: "s3://bkt/x", AttrMode: ModeNode}, false)
	b, _ := ParseSpec(map[string]string{AttrSource: "s3://bkt/x", AttrMode: ModeNode, AttrMetadataTTL: "1h"}, false)
	k1 := Credentials{Env: map[string]string{"AWS_ACCESS_KEY_ID": "one"}}
	k2 := Credentials{Env: map[string]string{"AWS_ACCESS_KEY_ID": "two"}}
	rotated := Credentials{Env: map[string]string{"AWS_ACCESS_KEY_ID": "one", "AWS_SECRET_ACCESS_KEY": "new"}}
	if first, again := a.ShareKey(k1), a.ShareKey(k1); first != again {
		t.Error("the same volume does not share its mount")
	}
	for name, other := range map[string]string{"other options": b.ShareKey(k1), "other credentials": a.ShareKey(k2),
		"another secret of the same identity": a.ShareKey(rotated)} {
		if other == a.ShareKey(k1) {
			t.Errorf("a volume with %s shares the mount", name)
		}
	}
}

// TestCacheKey: a node-mode cache is shared only by volumes that read the
// same bytes with the same authority.
func TestCacheKey(t *testing.T) {
	spec := func(kv ...string) Spec {
		attrs := map[string]string{AttrSource: "s3://bkt/x", AttrMode: ModeNode, AttrEphemeral: "false"}
		for i := 0; i+1 < len(kv); i += 2 {
			attrs[kv[i]] = kv[i+1]
		}
		s, err := ParseSpec(attrs, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	aws := func(id, secret string) Credentials {
		return Credentials{Env: map[string]string{"AWS_ACCESS_KEY_ID": id, "AWS_SECRET_ACCESS_KEY": secret}}
	}
	gcs := func(key string) Credentials { return Credentials{Files: map[string][]byte{GCSKeyFile: []byte(key)}} }
	const saA = `{"type":"service_account","client_email":"a@p.iam.gserviceaccount.com","private_key_id":"k1","private_key":"SECRET-1"}`
	const saA2 = `{"type":"service_account","client_email":"a@p.iam.gserviceaccount.com","private_key_id":"k1","private_key":"SECRET-2"}`
	const saB = `{"type":"service_account","client_email":"b@p.iam.gserviceaccount.com","private_key_id":"k9","private_key":"SECRET-1"}`
	base := spec().CacheKey(aws("AKIA1", "s1"), nil)
	tests := []struct {
		name string
		key  string
		same bool
	}{
		{"same volume", spec().CacheKey(aws("AKIA1", "s1"), nil), true},
		{"other options that do not change the bytes", spec(AttrMetadataTTL, "1h", AttrMountOptions, "max-fetches=8,uid=7").CacheKey(aws("AKIA1", "s1"), nil), true},
		{"a rotated secret of the same identity", spec().CacheKey(aws("AKIA1", "s2"), nil), true},
		{"other source", spec(AttrSource, "s3://bkt/y").CacheKey(aws("AKIA1", "s1"), nil), false},
		{"other endpoint", spec(AttrEndpointURL, "http://minio:9000").CacheKey(aws("AKIA1", "s1"), nil), false},
		{"endpoint from the driver", spec().CacheKey(aws("AKIA1", "s1"), []string{"--endpoint-url", "http://minio:9000"}), false},
		{"other access key id", spec().CacheKey(aws("AKIA2", "s1"), nil), false},
		{"ambient identity", spec().CacheKey(Credentials{}, nil), false},
		{"anonymous", spec(AttrMountOptions, "no-sign-request").CacheKey(Credentials{}, nil), false},
		{"shared tier", spec(AttrMountOptions, "shared-cache=s3://tier/n").CacheKey(aws("AKIA1", "s1"), nil), false},
		{"shared tier from the driver", spec().CacheKey(aws("AKIA1", "s1"), []string{"--shared-cache=s3://tier/n"}), false},
		{"block size", spec(AttrMountOptions, "block-size=4MiB").CacheKey(aws("AKIA1", "s1"), nil), false},
	}
	for _, tc := range tests {
		if (tc.key == base) != tc.same {
			t.Errorf("%s: shares the cache = %v, want %v", tc.name, tc.key == base, tc.same)
		}
	}
	if spec().CacheKey(gcs(saA), nil) != spec().CacheKey(gcs(saA2), nil) {
		t.Error("two keys of one GCS service account with the same key id do not share a cache")
	}
	if spec().CacheKey(gcs(saA), nil) == spec().CacheKey(gcs(saB), nil) {
		t.Error("two GCS service accounts share a cache")
	}
	if spec().CacheKey(gcs("not json"), nil) == spec().CacheKey(gcs("also not json"), nil) {
		t.Error("two unparsable key files share a cache")
	}
	// Two tiers differing only in a later flag: the last one wins, as in the mount.
	x := spec(AttrMountOptions, "shared-cache=s3://t1").CacheKey(Credentials{}, []string{"--shared-cache=s3://t2"})
	y := spec().CacheKey(Credentials{}, []string{"--shared-cache=s3://t1"})
	if x != y {
		t.Error("the volume's --shared-cache does not override the driver's, as the mount's flag parser does")
	}
}

func TestIdentityHasNoSecret(t *testing.T) {
	c := Credentials{Env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "hunter2", "AWS_SESSION_TOKEN": "tok"},
		Files: map[string][]byte{GCSKeyFile: []byte(`{"type":"service_account","client_email":"a@p","private_key_id":"k","private_key":"hunter3"}`)}}
	id := c.Identity()
	for _, secret := range []string{"hunter2", "tok", "hunter3"} {
		if strings.Contains(id, secret) {
			t.Errorf("identity %q holds a secret", id)
		}
	}
	if !strings.Contains(id, "AKIA1") || !strings.Contains(id, "a@p") {
		t.Errorf("identity %q does not name the access key and the service account", id)
	}
}

// An access key id without its secret is not the identity a mount reads
// as: the AWS SDK then falls back to the node's. Its cache must be the
// ambient one, not that of the key id's owner.
func TestIdentityOfAKeyIDAlone(t *testing.T) {
	alone := Credentials{Env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIA1"}}
	owner := Credentials{Env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s"}}
	if alone.Identity() == owner.Identity() {
		t.Errorf("a key id without its secret has the identity of its owner (%q)", owner.Identity())
	}
	if got := alone.Identity(); got != (Credentials{}).Identity() {
		t.Errorf("a key id without its secret: identity %q, want the ambient one", got)
	}
}

// gcloud's user credentials (authorized_user) all carry gcloud's OAuth
// client id and no service account: two users' keys are not one identity.
func TestIdentityOfUserCredentials(t *testing.T) {
	user := func(token string) Credentials {
		return Credentials{Files: map[string][]byte{GCSKeyFile: []byte(`{"type":"authorized_user",` +
			`"client_id":"764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com",` +
			`"client_secret":"d-FL95Q19q7MQmFpd7hHD0Ty","refresh_token":"` + token + `"}`)}}
	}
	alice, bob := user("1//alice"), user("1//bob")
	if alice.Identity() == bob.Identity() {
		t.Errorf("two users' authorized_user keys have one identity %q: they would share a node-mode cache", alice.Identity())
	}
	if strings.Contains(alice.Identity(), "alice") {
		t.Errorf("identity %q holds the refresh token", alice.Identity())
	}
}
