// Command strata mounts an object-storage bucket (S3, GCS) or a slow
// directory as a local POSIX filesystem backed by a persistent block
// cache on local NVMe.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/internal/config"
)

func main() {
	os.Args = asMountHelper(os.Args) // mount.strata, mount.fuse.strata: called by mount(8)
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata: "+err.Error())
		os.Exit(1)
	}
}

// newRoot builds the command tree.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "Mount S3, GCS or a slow directory as a local filesystem with a persistent NVMe cache",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(mountCmd(), umountCmd(), versionCmd(), cacheCmd(), syncCmd(), uploadsCmd(), refreshCmd())
	root.AddCommand(csiCmd(), sidecarCmd(), warmCmd())
	usageInArgErrors(root)
	return root
}

// usageInArgErrors makes a wrong number of arguments print the command's
// usage line: with SilenceUsage, cobra's "accepts 2 arg(s), received 1"
// alone names neither argument.
func usageInArgErrors(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return fmt.Errorf("%w; usage: %s", err, cmd.UseLine())
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageInArgErrors(sub)
	}
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Println("strata", config.Version)
		},
	}
}
