package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/sidecar"
)

func sidecarCmd() *cobra.Command {
	d := config.CSI()
	o := sidecar.Options{HandoffDir: d.SidecarHandoffDir, CacheDir: d.SidecarCacheDir}
	logLevel, logFormat := d.LogLevel, d.LogFormat
	var probe bool
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Serve the pod's Strata volumes handed over by the CSI node plugin",
		Long: `Run in the workload pod, unprivileged, next to the containers that read the
data (as a native sidecar: an init container with restartPolicy: Always, so a
Job completes). For each volume the node plugin mounted in sidecar mode it
connects to <handoff-dir>/<volume>/socket, receives the /dev/fuse descriptor
and the mount options, and serves the mount with its cache under
<cache-dir>/<volume>. It writes <handoff-dir>/<volume>/ready once serving (or
<volume>/error) and exits 0 when every volume is unmounted, when the plugin says
so, or on SIGTERM. 'strata sidecar --probe' is the startup probe.

Memory: with a container memory limit and no GOMEMLIMIT, the Go runtime is held
under 90% of the limit and --memory-limit defaults to a quarter of it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if probe {
				return sidecar.Probe(o.HandoffDir)
			}
			o.Logger = newLogger(os.Stderr, logLevel, logFormat)
			o.MountFlags = newMountFlagSet
			return sidecar.Run(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.HandoffDir, "handoff-dir", o.HandoffDir, "the emptyDir shared with the node plugin")
	f.StringVar(&o.CacheDir, "cache-dir", o.CacheDir, "parent of the per-volume cache directories (an emptyDir on local NVMe)")
	f.BoolVar(&probe, "probe", false, "exit 0 if every handed-over volume is served (startup/readiness probe)")
	f.DurationVar(&o.WaitTimeout, "wait-timeout", 0, "exit 1 if no volume is handed over within this time (0: wait forever)")
	f.StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", logFormat, "auto, text or json")
	return cmd
}
