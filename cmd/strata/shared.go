package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/internal/config"
)

// bindSharedFlags defines the shared cache tier's flags.
func bindSharedFlags(fs *pflag.FlagSet, c *config.SharedConfig) {}

// sharedState is what the shared tier keeps while mounted.
type sharedState struct{}

// wrapShared puts the shared cache tier (if configured) in front of the
// origin backend; the fetcher then reads through it.
func wrapShared(ctx context.Context, s *server, origin backend.Backend) (backend.Backend, error) {
	return origin, nil
}

// closeShared releases the shared tier.
func closeShared(s *server) {}
