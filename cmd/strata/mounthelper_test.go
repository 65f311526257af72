package main

import (
	"slices"
	"strings"
	"testing"
)

func TestHelperArgs(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		want     []string
		wantFake bool
		wantErr  string
	}{
		{
			name: "fstab line",
			argv: []string{"/sbin/mount.fuse.strata", "s3://bucket/prefix", "/mnt/data", "-o", "rw,_netdev,allow_other,cache_dir=/nvme/strata,metadata_ttl=indefinite"},
			want: []string{"/sbin/mount.fuse.strata", "mount", "s3://bucket/prefix", "/mnt/data", "--read-only=false", "--allow-other", "--cache-dir=/nvme/strata", "--metadata-ttl=indefinite"},
		},
		{
			name: "generic options ignored, ro, joined -o and repeated -o",
			argv: []string{"mount.strata", "gs://b", "/mnt/b", "-onofail,defaults,x-systemd.automount,nosuid,nodev", "-o", "ro,endpoint-url=http://127.0.0.1:4443", "-t", "fuse.strata"},
			want: []string{"mount.strata", "mount", "gs://b", "/mnt/b", "--read-only", "--endpoint-url=http://127.0.0.1:4443"},
		},
		{
			name: "sloppy, verbose, no-mtab flags and a namespace",
			argv: []string{"mount.strata", "-sv", "file:///data", "/mnt/d", "-n", "-N", "1234", "-o", "config=/etc/strata/d.yaml"},
			want: []string{"mount.strata", "mount", "file:///data", "/mnt/d", "--config=/etc/strata/d.yaml"},
		},
		{
			name:     "fake mount",
			argv:     []string{"mount.strata", "s3://b", "/mnt/b", "-f"},
			want:     []string{"mount.strata", "mount", "s3://b", "/mnt/b"},
			wantFake: true,
		},
		{
			name: "nonempty",
			argv: []string{"mount.strata", "s3://b", "/mnt/b", "-o", "nonempty,ro"},
			want: []string{"mount.strata", "mount", "s3://b", "/mnt/b", "--allow-nonempty", "--read-only"},
		},
		{name: "unknown option", argv: []string{"mount.strata", "s3://b", "/m", "-o", "cache_dri=/x"}, wantErr: `unknown option "cache_dri"`},
		{name: "value missing", argv: []string{"mount.strata", "s3://b", "/m", "-o", "cache_size"}, wantErr: "needs a value"},
		{name: "missing mountpoint", argv: []string{"mount.strata", "s3://b"}, wantErr: "usage"},
		{name: "-o without value", argv: []string{"mount.strata", "s3://b", "/m", "-o"}, wantErr: "-o needs a value"},
		{name: "print-config is not a mount option", argv: []string{"mount.strata", "s3://b", "/m", "-o", "print_config"}, wantErr: "unknown option"},
		{name: "unknown short flag", argv: []string{"mount.strata", "s3://b", "/m", "-z"}, wantErr: "unknown option -z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, fake, err := helperArgs(tc.argv)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) || fake != tc.wantFake {
				t.Fatalf("helperArgs = %q, fake %v, %v\nwant %q, fake %v", got, fake, err, tc.want, tc.wantFake)
			}
		})
	}
}

func TestAsMountHelperLeavesOtherNamesAlone(t *testing.T) {
	for _, argv := range [][]string{{"strata", "mount", "a", "b"}, {"/usr/local/bin/strata"}, {"mount.strata.old", "x"}} {
		if got := asMountHelper(argv); !slices.Equal(got, argv) {
			t.Errorf("asMountHelper(%q) = %q", argv, got)
		}
	}
}
