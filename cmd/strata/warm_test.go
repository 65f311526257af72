package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/internal/warm/warmtest"
)

// `strata warm --help` lists the flags warm acts on, not the mount's
// (--upload, --allow-other, --warm-on-mount ... mean nothing to warm).
func TestWarmHelpListsWarmFlagsOnly(t *testing.T) {
	cmd := warmCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
		shown = append(shown, m[1])
	}
	want := strings.Fields(`anonymous block-size cache-dir cache-size config endpoint-url force-path-style from-list help
		io-engine json key-file log-level max-fetches memory-limit metadata-ttl no-sign-request part-size prefix profile
		progress-interval region shared-cache shared-cache-endpoint-url shared-cache-force-path-style shared-cache-group-size
		shared-cache-key-file shared-cache-profile shared-cache-read-only shared-cache-region shared-cache-timeout shared-cache-write-buffer
		shared-cache-write-concurrency warm-concurrency`)
	slices.Sort(shown)
	slices.Sort(want)
	if !slices.Equal(shown, want) {
		t.Errorf("warm --help lists\n%v\nwant\n%v\n%s", shown, want, out.String())
	}
	// Hidden is not removed: a config file shared with the mount still
	// applies, and so does a mount flag given to warm by habit.
	if err := cmd.ParseFlags([]string{"--upload", "async", "--foreground"}); err != nil {
		t.Errorf("a mount flag given to warm: %v", err)
	}
}

// The final line counts what was warmed out of what was found: a listed
// path that does not exist is reported on its own, never subtracted from
// the objects (which printed "warmed -1 of 0 objects").
func TestWarmReportCounts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		paths       []string
		line        string
		failedPaths int64
	}{
		{"found and missing", []string{"d1", "/train/b0.bin", "missing.bin"}, "warmed 3 of 3 objects", 1},
		{"only missing", []string{"missing.bin", "nope/"}, "warmed 0 of 0 objects", 2},
		{"all found", []string{"top.txt"}, "warmed 1 of 1 objects", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := warmtest.New(t, warmtest.Tree, 1<<30)
			p, err := e.Job(warm.Request{Paths: tc.paths}).Run(context.Background(), nil)
			if p.Failed != 0 || p.FailedPaths != tc.failedPaths || (err != nil) != (tc.failedPaths > 0) {
				t.Fatalf("failed %d objects and %d paths (%v), want 0 and %d", p.Failed, p.FailedPaths, err, tc.failedPaths)
			}
			line := warmLine(p, "")
			if !strings.HasPrefix(line, tc.line) {
				t.Errorf("report %q, want it to start %q", line, tc.line)
			}
			if tc.failedPaths > 0 && (!strings.Contains(line, "not found") || !strings.Contains(err.Error(), "missing.bin")) {
				t.Errorf("report %q / error %v does not say a listed path was not found", line, err)
			}
		})
	}
}
