package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSource(t *testing.T) {
	tests := []struct {
		in      string
		want    Source
		wantErr string
	}{
		{in: "s3://bucket", want: Source{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://bucket/", want: Source{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://my.bucket-1/a/b", want: Source{Scheme: "s3", Bucket: "my.bucket-1", Prefix: "a/b/"}},
		{in: "gs://b_x/train/", want: Source{Scheme: "gs", Bucket: "b_x", Prefix: "train/"}},
		{in: "file:///data/x/", want: Source{Scheme: "file", Path: "/data/x"}},
		{in: "file://localhost/data", want: Source{Scheme: "file", Path: "/data"}},
		{in: "file:///mnt/my data", want: Source{Scheme: "file", Path: "/mnt/my data"}},
		{in: "file:///mnt/a%3Fb%23c%25", want: Source{Scheme: "file", Path: "/mnt/a?b#c%"}},
		{in: "file:///mnt/a?b", wantErr: "a ? or # ends"},
		{in: "file:///mnt/a#b", wantErr: "a ? or # ends"},
		{in: "bucket", wantErr: "want s3://"},
		{in: "s3:/bucket", wantErr: "want s3://"},
		{in: "s3://", wantErr: "no bucket"},
		{in: "http://x", wantErr: "unknown scheme"},
		{in: "://x", wantErr: "missing scheme"},
		{in: "s3://UPPER", wantErr: "not a valid bucket"},
		{in: "s3://b b", wantErr: "not a valid bucket"},
		{in: "s3://bucket/a//b", wantErr: "empty segment"},
		{in: "s3://bucket/a/../b", wantErr: `".." segment`},
		{in: "file://host/data", wantErr: "not a host"},
		{in: "file://relative", wantErr: "not a host"},
	}
	for _, tc := range tests {
		got, err := ParseSource(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseSource(%q) err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"s3://b/p", "gs://bucket", "file:///x", "s3://a//b", "file://h/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := ParseSource(s)
		if err != nil {
			return
		}
		if src.Prefix != "" && (!strings.HasSuffix(src.Prefix, "/") || strings.HasPrefix(src.Prefix, "/") || strings.Contains(src.Prefix, "//")) {
			t.Fatalf("ParseSource(%q) prefix %q not normalised", s, src.Prefix)
		}
		if src.Scheme == "file" && !strings.HasPrefix(src.Path, "/") {
			t.Fatalf("ParseSource(%q) relative path %q", s, src.Path)
		}
		again, err := ParseSource(src.String())
		if err != nil || again != src {
			t.Fatalf("ParseSource(%q) does not round trip: %+v -> %q -> %+v, %v", s, src, src.String(), again, err)
		}
	})
}

func TestParseSizeTTLMode(t *testing.T) {
	sizes := map[string]Size{"0": 0, "1048576": 1 << 20, "100GiB": 100 << 30, "512MiB": 512 << 20, "1.5 KiB": 1536, "2KB": 2000}
	for in, want := range sizes {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "lots", "1XB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if s := Size(1 << 20).String(); s != "1MiB" {
		t.Errorf("Size.String = %q", s)
	}
	ttls := map[string]TTL{"indefinite": Indefinite, "0": 0, "60s": TTL(time.Minute), "90": TTL(90 * time.Second), "5m": TTL(5 * time.Minute)}
	for in, want := range ttls {
		if got, err := ParseTTL(in); err != nil || got != want {
			t.Errorf("ParseTTL(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"-5s", "soon", ""} {
		if _, err := ParseTTL(bad); err == nil {
			t.Errorf("ParseTTL(%q) accepted", bad)
		}
	}
	if m, err := ParseMode("0640"); err != nil || m != 0o640 {
		t.Errorf("ParseMode: %v %v", m, err)
	}
	if _, err := ParseMode("999"); err == nil {
		t.Error("ParseMode(999) accepted")
	}
}

func FuzzParseValues(f *testing.F) {
	f.Add("100GiB")
	f.Add("indefinite")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil && n < 0 {
			t.Fatalf("negative size from %q", s)
		}
		if d, err := ParseTTL(s); err == nil && d < 0 && d != Indefinite {
			t.Fatalf("negative TTL from %q", s)
		}
	})
}

func TestValidate(t *testing.T) {
	mut := []func(*Config){
		func(c *Config) { c.BlockSize = 3 << 20 },
		func(c *Config) { c.BlockSize = 4096 },
		func(c *Config) { c.MemoryLimit = 1 << 20 },
		func(c *Config) { c.Passthrough = "maybe" },
		func(c *Config) { c.IOEngine = "aio" },
		func(c *Config) { c.EndpointURL = "localhost:9000" },
		func(c *Config) { c.MaxFetches = 0 },
	}
	for i, m := range mut {
		c := Defaults()
		m(&c)
		if err := c.Validate(); !errors.Is(err, errBad) {
			t.Errorf("case %d: Validate() = %v", i, err)
		}
	}
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestDefaultCacheDirPerSource(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	a, _ := DefaultCacheDir(Source{Scheme: "s3", Bucket: "b", Prefix: "x/"}, "")
	b, _ := DefaultCacheDir(Source{Scheme: "s3", Bucket: "b", Prefix: "y/"}, "")
	c, _ := DefaultCacheDir(Source{Scheme: "s3", Bucket: "b", Prefix: "x/"}, "http://minio:9000")
	if !strings.HasPrefix(a, "/xdg/strata/s3-b-") || a == b || a == c {
		t.Fatalf("cache dirs not distinct per source: %s %s %s", a, b, c)
	}
}

// TestValidateCacheSizeBelowFourBlocks: `--cache-size 10` (ten bytes, the
// unit forgotten) mounted a cache that could hold nothing, with every
// write failing ENOSPC and no word at mount time. Now a limit smaller than
// four blocks is refused, naming the smallest; 0 still means "keep 10% of
// the disk free".
func TestValidateCacheSizeBelowFourBlocks(t *testing.T) {
	for _, size := range []Size{10, 1 << 20, 4<<20 - 1} {
		c := Defaults()
		c.CacheSize = size
		err := c.Validate()
		if !errors.Is(err, errBad) || !strings.Contains(err.Error(), "--cache-size") || !strings.Contains(err.Error(), "4MiB") {
			t.Errorf("--cache-size %s: Validate() = %v, want an error naming --cache-size and 4MiB", size, err)
		}
	}
	for _, size := range []Size{0, 4 << 20, 100 << 30} {
		c := Defaults()
		c.CacheSize = size
		if err := c.Validate(); err != nil {
			t.Errorf("--cache-size %s: %v", size, err)
		}
	}
}
