package main

import (
	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/config"
)

// bindOpsFlags defines operational flags (metrics, warming, config file).
func bindOpsFlags(fs *pflag.FlagSet, c *config.OpsConfig) {}

// opsState is what operations keep while mounted (metrics server, ...).
type opsState struct{}

// startOps starts operational services once the filesystem is mounted
// and before readiness is reported; an error fails the mount.
func startOps(s *server) error { return nil }

// stopOps stops them at unmount, before the cache closes.
func stopOps(s *server) {}
