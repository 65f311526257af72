package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSharedConfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		mod     func(*SharedConfig)
		wantErr string
		bucket  string
		prefix  string
	}{
		{name: "off by default", mod: func(*SharedConfig) {}},
		{name: "bucket", mod: func(s *SharedConfig) { s.URL = "s3://cache--usw2-az1--x-s3" }, bucket: "cache--usw2-az1--x-s3"},
		{name: "bucket and prefix", mod: func(s *SharedConfig) { s.URL = "s3://cache/team/a/" }, bucket: "cache", prefix: "team/a/"},
		{name: "not s3", mod: func(s *SharedConfig) { s.URL = "gs://cache" }, wantErr: "want s3://BUCKET"},
		{name: "bad url", mod: func(s *SharedConfig) { s.URL = "cache" }, wantErr: "--shared-cache"},
		{name: "endpoint without cache", mod: func(s *SharedConfig) { s.EndpointURL = "http://x:9000" }, wantErr: "--shared-cache is not"},
		{name: "key file without cache", mod: func(s *SharedConfig) { s.KeyFile = "/etc/strata/tier.key" }, wantErr: "--shared-cache-key-file is set but --shared-cache is not"},
		{name: "bad endpoint", mod: func(s *SharedConfig) { s.URL, s.EndpointURL = "s3://cache", "x:9000" }, wantErr: "endpoint-url"},
		{name: "timeout too short", mod: func(s *SharedConfig) { s.URL, s.Timeout = "s3://cache", time.Millisecond }, wantErr: "timeout"},
		{name: "no writers", mod: func(s *SharedConfig) { s.URL, s.WriteConcurrency = "s3://cache", 0 }, wantErr: "write-concurrency"},
		{name: "tiny write buffer", mod: func(s *SharedConfig) { s.URL, s.WriteBuffer = "s3://cache", 1000 }, wantErr: "write-buffer"},
		{name: "huge group", mod: func(s *SharedConfig) { s.URL, s.GroupSize = "s3://cache", 1<<30 }, wantErr: "group-size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Defaults()
			c.mod(&cfg.Shared)
			err := cfg.Validate()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, errBad) {
					t.Fatalf("Validate() = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.Shared.Enabled() {
				return
			}
			b, p, err := cfg.Shared.Location()
			if err != nil || b != c.bucket || p != c.prefix {
				t.Fatalf("Location() = %q, %q, %v", b, p, err)
			}
		})
	}
}
