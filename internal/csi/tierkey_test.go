package csi

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNodeModeTierNeedsKey: a node-mode volume reading through a shared
// tier is refused unless the driver signs the tier; with the driver's key
// the mount gets --shared-cache-key-file, and a volume without a tier
// never does (the mount refuses the flag without --shared-cache).
func TestNodeModeTierNeedsKey(t *testing.T) {
	tiered := Spec{Source: "s3://data/train", Args: []string{"--shared-cache=s3://tier/nodes"}}
	plain := Spec{Source: "s3://data/train"}
	const flag = "--shared-cache-key-file=/etc/strata/tier.key"

	unsigned := Options{}
	err := unsignedTier(tiered, unsigned.tierKeyArgs(tiered))
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("tiered volume, driver without a key: %v, want FailedPrecondition", err)
	}
	if err := unsignedTier(plain, unsigned.tierKeyArgs(plain)); err != nil {
		t.Errorf("volume without a tier: %v", err)
	}

	signed := Options{SharedCacheKeyFile: "/etc/strata/tier.key", ExtraMountArgs: []string{"--max-fetches=64"}}
	args := signed.tierKeyArgs(tiered)
	if !slices.Contains(args, flag) || !slices.Contains(args, "--max-fetches=64") {
		t.Errorf("tiered volume's driver args %v, want the key flag and the extra args", args)
	}
	if err := unsignedTier(tiered, args); err != nil {
		t.Errorf("tiered volume, driver with a key: %v", err)
	}
	if args := signed.tierKeyArgs(plain); slices.Contains(args, flag) {
		t.Errorf("volume without a tier gets %v", args)
	}
	if tiered.CacheKey(Credentials{}, signed.tierKeyArgs(tiered)) == tiered.CacheKey(Credentials{}, nil) {
		t.Errorf("a signed and an unsigned tier share a cache key")
	}
}
