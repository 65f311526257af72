package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/stratafs/strata/internal/config"
)

func mountFlags(t *testing.T, args ...string) (*pflag.FlagSet, *config.Config) {
	t.Helper()
	cfg := config.Defaults()
	fs := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	bindMountFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs, &cfg
}

func TestConfigFilePrecedence(t *testing.T) {
	file := []byte(`# settings for the imagenet mount
cache-dir: /nvme/from-file
cache-size: 100GiB
metadata-ttl: indefinite
memory-limit: 512MiB
allow-other: true
file-mode: 0640
metrics-addr: "127.0.0.1:9464"
`)
	fs, cfg := mountFlags(t, "--cache-size", "20GiB", "--metrics-addr=:9999")
	origins, err := applyConfig(fs, "strata.yaml", file)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		got    any
		want   any
		origin string
	}{
		{"cache-dir", cfg.CacheDir, "/nvme/from-file", "config file"},
		{"cache-size", cfg.CacheSize, config.Size(20 << 30), "flag (overrides the config file)"},
		{"metadata-ttl", cfg.MetadataTTL, config.Indefinite, "config file"},
		{"memory-limit", cfg.MemoryLimit, config.Size(512 << 20), "config file"},
		{"allow-other", cfg.AllowOther, true, "config file"},
		{"file-mode", cfg.FileMode, config.Mode(0o640), "config file"},
		{"metrics-addr", cfg.Ops.MetricsAddr, ":9999", "flag (overrides the config file)"},
		{"block-size", cfg.BlockSize, config.Size(1 << 20), ""},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
		if origins[tc.name] != tc.origin {
			t.Errorf("%s origin %q, want %q", tc.name, origins[tc.name], tc.origin)
		}
	}
}

func TestConfigFileErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"unknown key", "cache-dir: /x\ncache_sise: 1GiB\n", `strata.yaml:2: unknown key "cache_sise"`},
		{"bad value", "\n\ncache-size: lots\n", "strata.yaml:3: cache-size: size \"lots\""},
		{"bad bool", "allow-other: maybe\n", "strata.yaml:1: allow-other"},
		{"list value", "cache-dir: [a, b]\n", "want a single value"},
		{"null value", "cache-dir:\n", "want a single value"},
		{"twice", "cache-dir: /a\ncache-dir: /b\n", "given twice"},
		{"not a mapping", "- cache-dir\n", "want a mapping"},
		{"config in config", "config: other.yaml\n", `unknown key "config"`},
		{"syntax", "cache-dir: [\n", "strata.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := mountFlags(t)
			_, err := applyConfig(fs, "strata.yaml", []byte(tc.file))
			if !errors.Is(err, errConfigFile) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	fs, _ := mountFlags(t)
	if o, err := applyConfig(fs, "empty.yaml", []byte("# nothing\n")); err != nil || len(o) != 0 {
		t.Fatalf("empty file: %v %v", o, err)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"secret-access-key", "abc", "<redacted>"},
		{"shared-cache-token", "t0k", "<redacted>"},
		{"endpoint-url", "http://user:hunter2@minio:9000", "http://user:xxxxx@minio:9000"},
		{"endpoint-url", "http://minio:9000", "http://minio:9000"},
		{"key-file", "/etc/gcs.json", "/etc/gcs.json"},
		{"secret-access-key", "", ""},
	}
	for _, tc := range tests {
		if got := redact(tc.name, tc.value); got != tc.want {
			t.Errorf("redact(%s, %q) = %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
}

// --print-config prints YAML that is itself a valid config file giving
// the same settings, annotated with origins, with no secret in it.
func TestPrintConfigRoundTrips(t *testing.T) {
	fs, _ := mountFlags(t, "--cache-size", "20GiB", "--endpoint-url", "http://ak:sekrit@127.0.0.1:9000", "--config", "x.yaml")
	origins, err := applyConfig(fs, "x.yaml", []byte("memory-limit: 1GiB\nmetadata-ttl: indefinite\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printConfig(&out, fs, origins, []string{"s3://bucket/p", "/mnt/x"}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"cache-size: 20GiB # flag\n", "memory-limit: 1GiB # config file\n", "metadata-ttl: indefinite # config file\n",
		"block-size: 1MiB # default\n", "# derived from the source", "config file: x.yaml",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("print-config lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "sekrit") {
		t.Fatalf("print-config shows a secret:\n%s", text)
	}
	var m map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("print-config is not YAML: %v", err)
	}
	again, _ := mountFlags(t)
	if _, err := applyConfig(again, "printed.yaml", out.Bytes()); err != nil {
		t.Fatalf("print-config output is not a valid config file: %v", err)
	}
	for _, name := range []string{"cache-size", "memory-limit", "metadata-ttl", "cache-dir"} {
		if a, b := again.Lookup(name).Value.String(), fs.Lookup(name).Value.String(); a != b && name != "cache-dir" {
			t.Errorf("%s: printed and re-read %q, effective %q", name, a, b)
		}
	}
}

// --print-config shows what a mount would run with, so it refuses what
// the mount would refuse: a setting printed as effective must be one.
func TestPrintConfigRefusesWhatTheMountRefuses(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/strata.yaml"
	if err := os.WriteFile(file, []byte("upload: asyncc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--upload", "asyncc"},
		{"--config", file},
		{"--block-size", "3MiB"},
	} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"mount", "s3://bucket", dir, "--print-config"}, args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("mount %v --print-config: err = %v, want the mount's refusal", args, err)
		}
	}
	root := newRoot()
	root.SetArgs([]string{"mount", "s3:/bucket", dir, "--print-config"})
	if err := root.Execute(); err == nil {
		t.Errorf("--print-config of a bad source: no error")
	}
}
