package csi

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	src := map[string]string{AttrSource: "s3://bucket/train"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range src {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		attrs    map[string]string
		readOnly bool
		want     Spec
		wantErr  string
		wantIs   error // errBadAttr unless set
	}{
		{name: "defaults", attrs: src, want: Spec{Source: "s3://bucket/train", Mode: ModeSidecar, ReadOnly: true,
			HandoffVolume: DefaultHandoffVolume, ReadAheadKB: 1024, Args: []string{"--read-only=true"}, origin: originUnknown}},
		{name: "everything", attrs: with(AttrEphemeral, "false", AttrMode, "node", AttrCacheSize, "100GiB", AttrMetadataTTL, "indefinite",
			AttrReadOnly, "false", AttrMemoryLimit, "512MiB", AttrEndpointURL, "http://minio:9000", AttrRegion, "eu-west-1",
			AttrMountOptions, "force-path-style, max-fetches=128", AttrReadAheadKB, "4096",
			"csi.storage.k8s.io/pod.name", "p", "csi.storage.k8s.io/pod.namespace", "ns"),
			want: Spec{Source: "s3://bucket/train", Mode: ModeNode, ReadOnly: false,
				HandoffVolume: DefaultHandoffVolume, ReadAheadKB: 4096, PodNamespace: "ns", PodName: "p", origin: originPV,
				Args: []string{"--cache-size=100GiB", "--endpoint-url=http://minio:9000", "--memory-limit=512MiB",
					"--metadata-ttl=indefinite", "--region=eu-west-1", "--read-ahead-kb=4096", "--read-only=false", "--force-path-style", "--max-fetches=128"}}},
		{name: "request read-only wins", attrs: with(AttrReadOnly, "false"), readOnly: true, want: Spec{Source: "s3://bucket/train",
			Mode: ModeSidecar, ReadOnly: true, HandoffVolume: DefaultHandoffVolume, ReadAheadKB: 1024, Args: []string{"--read-only=true"},
			origin: originUnknown}},
		{name: "inline tuning", attrs: with(AttrEphemeral, "true", AttrMetadataTTL, "1m", AttrMountOptions, "max-fetches=8,uid=1000,block-size=4MiB"),
			want: Spec{Source: "s3://bucket/train", Mode: ModeSidecar, ReadOnly: true, HandoffVolume: DefaultHandoffVolume, ReadAheadKB: 1024,
				Args: []string{"--metadata-ttl=1m", "--read-only=true", "--max-fetches=8", "--uid=1000", "--block-size=4MiB"}, origin: originInline}},
		{name: "PV shared tier", attrs: with(AttrEphemeral, "false", AttrMountOptions, "shared-cache=s3://tier/n,shared-cache-endpoint-url=http://t"),
			want: Spec{Source: "s3://bucket/train", Mode: ModeSidecar, ReadOnly: true, HandoffVolume: DefaultHandoffVolume, ReadAheadKB: 1024,
				Args: []string{"--read-only=true", "--shared-cache=s3://tier/n", "--shared-cache-endpoint-url=http://t"}, origin: originPV}},
		{name: "inline endpoint", attrs: with(AttrEphemeral, "true", AttrEndpointURL, "http://evil"), wantIs: errNotAllowed,
			wantErr: "endpointURL changes where the volume's bytes come from; an inline ephemeral volume may not set it"},
		{name: "endpoint of a volume of unknown origin", attrs: with(AttrEndpointURL, "http://evil"), wantIs: errNotAllowed, wantErr: "podInfoOnMount: true"},
		{name: "inline shared tier", attrs: with(AttrEphemeral, "true", AttrMountOptions, "max-fetches=8,shared-cache=s3://evil"),
			wantIs: errNotAllowed, wantErr: "--shared-cache changes where the volume's bytes come from"},
		{name: "inline endpoint flag", attrs: with(AttrEphemeral, "true", AttrMountOptions, "--endpoint-url=http://evil"),
			wantIs: errNotAllowed, wantErr: "--endpoint-url"},
		{name: "inline tier tuning", attrs: with(AttrEphemeral, "true", AttrMountOptions, "shared-cache-read-only=false"),
			wantIs: errNotAllowed, wantErr: "--shared-cache-read-only"},
		{name: "inline metrics listener", attrs: with(AttrEphemeral, "true", AttrMountOptions, "metrics-addr=0.0.0.0:80"),
			wantIs: errNotAllowed, wantErr: "--metrics-addr"},
		{name: "PV profile", attrs: with(AttrEphemeral, "false", AttrMountOptions, "profile=admin"), wantIs: errNotAllowed, wantErr: "--profile is set by the driver"},
		{name: "PV shared tier profile", attrs: with(AttrEphemeral, "false", AttrMountOptions, "shared-cache-profile=admin"),
			wantIs: errNotAllowed, wantErr: "--shared-cache-profile is set by the driver"},
		{name: "PV key file", attrs: with(AttrEphemeral, "false", AttrMountOptions, "key-file=/etc/k.json"), wantIs: errNotAllowed, wantErr: "--key-file"},
		{name: "read-only flag", attrs: with(AttrEphemeral, "false", AttrMountOptions, "read-only=false"), wantIs: errNotAllowed, wantErr: "use the readOnly volume attribute"},
		{name: "unknown flag", attrs: with(AttrEphemeral, "false", AttrMountOptions, "some-new-thing=1"), wantErr: "--some-new-thing is not a mount option a volume may set"},
		{name: "bad ephemeral", attrs: with(AttrEphemeral, "maybe"), wantErr: "want true or false"},
		{name: "no source", attrs: map[string]string{}, wantErr: "source is required"},
		{name: "bad source", attrs: map[string]string{AttrSource: "bucket"}, wantErr: "want s3://"},
		// A source is strata mount's first argument: one that reads as a
		// flag must never get there.
		{name: "source that is a flag", attrs: map[string]string{AttrSource: "--config=/x://y"}, wantErr: "want s3://"},
		{name: "source with a bad bucket", attrs: map[string]string{AttrSource: "s3://-x"}, wantErr: "not a valid bucket name"},
		{name: "typo", attrs: with("metadataTtl", "1m"), wantErr: `unknown key "metadataTtl"`},
		{name: "bad mode", attrs: with(AttrMode, "daemon"), wantErr: "want sidecar or node"},
		{name: "bad bool", attrs: with(AttrReadOnly, "yes please"), wantErr: "want true or false"},
		{name: "relative cache", attrs: with(AttrCacheDir, "cache"), wantErr: "absolute path"},
		{name: "node cache dir", attrs: with(AttrMode, ModeNode, AttrCacheDir, "/c"), wantErr: "sidecar mode"},
		{name: "denied flag", attrs: with(AttrMountOptions, "cache-dir=/etc"), wantIs: errNotAllowed, wantErr: "set by the driver"},
		{name: "denied path flag", attrs: with(AttrMountOptions, "--some-new-file=/etc/shadow"), wantErr: "not a mount option a volume may set"},
		{name: "not a flag", attrs: with(AttrMountOptions, "=x"), wantErr: "not a flag"},
		{name: "handoff slash", attrs: with(AttrHandoffVolume, "../x"), wantErr: "want a volume name"},
		{name: "empty endpoint", attrs: with(AttrEphemeral, "false", AttrEndpointURL, ""), wantErr: "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSpec(tc.attrs, tc.readOnly)
			if tc.wantErr != "" {
				if tc.wantIs == nil {
					tc.wantIs = errBadAttr
				}
				if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseSecrets(t *testing.T) {
	tests := []struct {
		in      map[string]string
		env     []string
		wantErr string
	}{
		{in: map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"},
			env: []string{"AWS_ACCESS_KEY_ID=a", "AWS_SECRET_ACCESS_KEY=s"}},
		{in: map[string]string{"key.json": "{}"}, env: []string{"GOOGLE_APPLICATION_CREDENTIALS=/d/key.json"}},
		{in: map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t"},
			env: []string{"AWS_ACCESS_KEY_ID=a", "AWS_SECRET_ACCESS_KEY=s", "AWS_SESSION_TOKEN=t"}},
		// Only credentials: anything else changes how or where the
		// (privileged, in node mode) mount runs, or names a file on the node.
		{in: map[string]string{"key.json": "{}", "GOOGLE_APPLICATION_CREDENTIALS": "/var/lib/node-key.json"}, wantErr: `"GOOGLE_APPLICATION_CREDENTIALS"`},
		{in: map[string]string{"AWS_ACCESS_KEY_ID": "a", "HTTPS_PROXY": "http://attacker:3128"}, wantErr: `"HTTPS_PROXY"`},
		{in: map[string]string{"AWS_CONFIG_FILE": "/root/.aws/config"}, wantErr: `"AWS_CONFIG_FILE"`},
		{in: map[string]string{"AWS_SHARED_CREDENTIALS_FILE": "/root/.aws/credentials"}, wantErr: `"AWS_SHARED_CREDENTIALS_FILE"`},
		{in: map[string]string{"AWS_PROFILE": "admin"}, wantErr: `"AWS_PROFILE"`},
		{in: map[string]string{"AWS_ENDPOINT_URL": "http://attacker"}, wantErr: `"AWS_ENDPOINT_URL"`},
		{in: map[string]string{"AWS_CA_BUNDLE": "/etc/evil.pem"}, wantErr: `"AWS_CA_BUNDLE"`},
		{in: map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/secrets/other"}, wantErr: `"AWS_WEB_IDENTITY_TOKEN_FILE"`},
		{in: map[string]string{"AWS_REGION": "eu-west-1"}, wantErr: `use the region volume attribute`},
		{in: map[string]string{"STORAGE_EMULATOR_HOST": "attacker:4443"}, wantErr: `"STORAGE_EMULATOR_HOST"`},
		{in: map[string]string{"STRATA_PPROF": "0.0.0.0:6060"}, wantErr: `"STRATA_PPROF"`},
		{in: map[string]string{"GODEBUG": "x=1"}, wantErr: `"GODEBUG"`},
		{in: map[string]string{"LD_PRELOAD": "/evil.so"}, wantErr: `"LD_PRELOAD"`},
		{in: map[string]string{"aws_access_key_id": "a"}, wantErr: `"aws_access_key_id"`},
		{in: map[string]string{"access key": "hunter2"}, wantErr: `"access key"`},
		// Values that cannot be sent in a request (the mount took that for
		// an unreachable endpoint and could start offline on a warm cache).
		{in: map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SESSION_TOKEN": "x\ny"}, wantErr: `"AWS_SESSION_TOKEN": its value has a space, control`},
		{in: map[string]string{"AWS_ACCESS_KEY_ID": "a\n"}, wantErr: `a trailing newline?`},
		{in: map[string]string{"AWS_SECRET_ACCESS_KEY": "s\x01"}, wantErr: `"AWS_SECRET_ACCESS_KEY"`},
		{in: map[string]string{"AWS_SECRET_ACCESS_KEY": "sé"}, wantErr: `non-ASCII`},
	}
	for _, tc := range tests {
		c, err := ParseSecrets(tc.in)
		if tc.wantErr != "" {
			if !errors.Is(err, errBadSecret) || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "hunter2") ||
				strings.Contains(err.Error(), "attacker") {
				t.Errorf("ParseSecrets(%v) err = %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Environ("/d"); !reflect.DeepEqual(got, tc.env) {
			t.Errorf("Environ = %v, want %v", got, tc.env)
		}
	}
}

func TestPodPaths(t *testing.T) {
	tests := []struct {
		target, dir, vol string
	}{
		{"/var/lib/kubelet/pods/0c8e/volumes/kubernetes.io~csi/data/mount",
			"/var/lib/kubelet/pods/0c8e/volumes/kubernetes.io~empty-dir/strata-handoff/data", "data"},
		{"/var/lib/kubelet/pods/0c8e/volumes/kubernetes.io~csi/data/other", "", ""},
		{"/tmp/csi-mount/target", "", ""},
	}
	for _, tc := range tests {
		dir, vol, err := podPaths(tc.target, DefaultHandoffVolume)
		if tc.dir == "" {
			if err == nil {
				t.Errorf("podPaths(%s) accepted", tc.target)
			}
			continue
		}
		if err != nil || dir != tc.dir || vol != tc.vol {
			t.Errorf("podPaths(%s) = %s, %s, %v", tc.target, dir, vol, err)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := map[string]string{"unix:///csi/csi.sock": "/csi/csi.sock", "unix:/a/b": "/a/b", "/x/y.sock": "/x/y.sock",
		"tcp://1.2.3.4:5": "", "": ""}
	for in, want := range tests {
		got, err := ParseEndpoint(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("ParseEndpoint(%q) = %q, %v", in, got, err)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	const s = `36 35 98:0 /mnt1 /mnt/with\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue
42 27 0:39 / /tmp/probe/mnt rw,nosuid,nodev,relatime - fuse.strata s3://b/ ro,user_id=0,group_id=0
bad line`
	got := parseMountinfo(s)
	want := []mountInfo{{Dev: "98:0", Root: "/mnt1", Mountpoint: "/mnt/with space", FSType: "ext3", Source: "/dev/root"},
		{Dev: "0:39", Root: "/", Mountpoint: "/tmp/probe/mnt", FSType: "fuse.strata", Source: "s3://b/"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
}

func TestCheckNodeKeyFile(t *testing.T) {
	for _, tc := range []struct {
		key     string
		wantErr string
	}{
		{`{"type":"service_account","client_email":"a@b","private_key":"k"}`, ""},
		{`{"type":"authorized_user","refresh_token":"r"}`, ""},
		{`{"type":"external_account","credential_source":{"file":"/etc/shadow"},"token_url":"http://attacker"}`, `type "external_account"`},
		{`{"type":"impersonated_service_account","source_credentials":{"type":"external_account"}}`, `type "impersonated_service_account"`},
		{`{"credential_source":{"url":"http://169.254.169.254/"}}`, `type ""`},
		{`not json`, `not a JSON credentials file`},
		{`{"type":"service_account","token_uri":"https://oauth2.googleapis.com/token"}`, ""},
		{`{"type":"service_account","token_uri":"http://10.0.0.1:8080/attacker"}`, `token_uri is not Google's`},
		{`{"type":"authorized_user","token_uri":"http://169.254.169.254/attacker"}`, `token_uri is not Google's`},
	} {
		err := Credentials{Files: map[string][]byte{GCSKeyFile: []byte(tc.key)}}.checkNodeKeyFile()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("checkNodeKeyFile(%s) = %v, want %q", tc.key, err, tc.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "attacker") {
			t.Errorf("checkNodeKeyFile(%s): the error shows the key's content: %v", tc.key, err)
		}
	}
	if err := (Credentials{}).checkNodeKeyFile(); err != nil {
		t.Errorf("no key.json: %v", err)
	}
}

func TestInlineNodeModeFileSource(t *testing.T) {
	for _, tc := range []struct {
		source, ephemeral string
		ok                bool
	}{
		{"file:///var/lib/kubelet/pods", "true", false},
		{"file://localhost/var/lib/kubelet", "true", false},
		{"file:///data", "", false}, // unknown origin: treated as inline
		{"file:///data", "false", true},
		{"s3://bucket/prefix", "true", true},
	} {
		attrs := map[string]string{AttrSource: tc.source, AttrMode: ModeNode}
		if tc.ephemeral != "" {
			attrs[AttrEphemeral] = tc.ephemeral
		}
		s, err := ParseSpec(attrs, true)
		if err != nil {
			t.Fatal(err)
		}
		err = s.checkInlineNodeMode(true)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, errNotAllowed)) {
			t.Errorf("%s (ephemeral %q) on a driver allowing inline node mode: %v, want ok=%v", tc.source, tc.ephemeral, err, tc.ok)
		}
	}
}

func TestInlineNodeModeIdentity(t *testing.T) {
	aws := map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"}
	for _, tc := range []struct {
		source, opts string
		secrets      map[string]string
		driver       []string
		ok           bool
	}{
		{"s3://bkt", "", nil, nil, false},
		{"s3://bkt", "", aws, nil, true},
		{"s3://bkt", "", map[string]string{"AWS_ACCESS_KEY_ID": "a"}, nil, false}, // no secret: the SDK falls back to the node's
		{"s3://bkt", "", map[string]string{"AWS_SESSION_TOKEN": "t"}, nil, false}, // likewise
		{"gs://bkt", "", aws, nil, false},                                         // GCS ignores AWS keys
		{"gs://bkt", "", map[string]string{"key.json": `{"type":"service_account"}`}, nil, true},
		{"s3://bkt", "no-sign-request", nil, nil, true},
		{"gs://bkt", "anonymous", nil, nil, true},
		{"s3://bkt", "no-sign-request=false", nil, nil, false},
		{"s3://bkt", "", nil, []string{"--profile=tenants"}, true}, // the driver chose it for every volume
		{"s3://bkt", "", nil, []string{"--max-fetches=8"}, false},
	} {
		attrs := map[string]string{AttrSource: tc.source, AttrMode: ModeNode, AttrEphemeral: "true", AttrMountOptions: tc.opts}
		s, err := ParseSpec(attrs, true)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseSecrets(tc.secrets)
		if err != nil {
			t.Fatal(err)
		}
		err = s.checkInlineIdentity(c, tc.driver)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, errNotAllowed)) {
			t.Errorf("%s %q secrets %v driver %v: %v, want ok=%v", tc.source, tc.opts, tc.secrets, tc.driver, err, tc.ok)
		}
		attrs[AttrEphemeral] = "false"
		if s, _ := ParseSpec(attrs, true); s.checkInlineIdentity(c, tc.driver) != nil {
			t.Errorf("%s %q as a PersistentVolume: refused", tc.source, tc.opts)
		}
	}
}
