package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/csi"
)

// TestCSIFlagScopes: the CSI driver knows who may set every mount flag
// (any volume, a PersistentVolume, or the driver only), so a new flag is
// refused to volumes until someone decides, and nothing it lists is stale.
func TestCSIFlagScopes(t *testing.T) {
	cfg := config.Defaults()
	fs := newMountFlagSet(&cfg)
	seen := 0
	fs.VisitAll(func(f *pflag.Flag) {
		seen++
		if csi.FlagScope(f.Name) == "" {
			t.Errorf("mount flag --%s has no scope in internal/csi/policy.go", f.Name)
		}
		if f.Shorthand != "" && csi.FlagScope(f.Shorthand) == "" {
			t.Errorf("mount flag -%s (--%s) has no scope in internal/csi/policy.go", f.Shorthand, f.Name)
		}
	})
	if seen < 40 {
		t.Fatalf("only %d mount flags", seen)
	}
	for _, name := range csi.ScopedFlags() {
		known := fs.Lookup(name) != nil || (len(name) == 1 && fs.ShorthandLookup(name) != nil)
		if !known && name != "help" && name != "h" {
			t.Errorf("internal/csi/policy.go gives a scope to --%s, which strata mount does not have", name)
		}
	}
}
