package main

import (
	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/config"
)

// bindWriteFlags defines the write path's flags.
func bindWriteFlags(fs *pflag.FlagSet, c *config.WriteConfig) {}
