package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/csi"
)

func csiCmd() *cobra.Command {
	opts := csi.DefaultOptions()
	d := config.CSI()
	endpoint, logLevel, logFormat := d.Endpoint, d.LogLevel, d.LogFormat
	cmd := &cobra.Command{
		Use:   "csi --endpoint unix:///csi/csi.sock --node-id NAME",
		Short: "Run the Kubernetes CSI node plugin (Identity and Node services)",
		Long: `Run Strata's CSI node plugin, as the DaemonSet in deploy/ does. It needs root
and /dev/fuse. Volumes are served in one of two modes, chosen per volume by the
"mode" attribute:

  sidecar  the plugin mounts the target on a /dev/fuse descriptor and hands it
           to 'strata sidecar' in the pod, which serves it unprivileged
  node     one privileged 'strata mount' per volume on the node (shared by
           every pod using it, cache under --cache-root), bind-mounted into pods;
           PersistentVolumes only unless --allow-inline-node-mode

An inline ephemeral volume (written by any pod author) may set tuning options
only; the endpoint, the shared tier and credential files come from a
PersistentVolume or from this driver's --mount-arg, and secrets may carry
credentials only (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
key.json).

See docs/kubernetes.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.NodeID == "" {
				opts.NodeID = os.Getenv("NODE_NAME")
			}
			opts.Logger = newLogger(os.Stderr, logLevel, logFormat)
			opts.Version = config.Version
			opts.ValidateArgs = validateMountArgs
			if len(opts.ExtraMountArgs) > 0 {
				if err := validateMountArgs(opts.ExtraMountArgs); err != nil {
					return fmt.Errorf("--mount-arg: %w", err)
				}
			}
			d, err := csi.New(opts)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return d.Serve(ctx, endpoint)
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoint, "endpoint", endpoint, "CSI endpoint (unix:///path)")
	f.StringVar(&opts.NodeID, "node-id", "", "this node's name (default: $NODE_NAME)")
	f.StringVar(&opts.CacheRoot, "cache-root", opts.CacheRoot, "node mode: directory for the per-dataset caches (put it on NVMe)")
	f.StringVar(&opts.StateDir, "state-dir", opts.StateDir, "node mode: shared mountpoints and who uses them")
	f.DurationVar(&opts.HandoffTimeout, "handoff-timeout", opts.HandoffTimeout, "sidecar mode: give up a mount no sidecar took within this time")
	f.StringVar(&opts.StrataBin, "strata-bin", "", "node mode: the strata binary to run mounts with (default: this one)")
	f.StringArrayVar(&opts.ExtraMountArgs, "mount-arg", nil, "node mode: a strata mount flag added to every mount (repeatable), e.g. --mount-arg=--max-fetches=128")
	f.StringVar(&opts.SharedCacheKeyFile, "shared-cache-key-file", "", "node mode: the key (a file on the node, the same on every node) that signs the shared cache tier; node-mode volumes with a shared-cache are refused without it")
	f.BoolVar(&opts.AllowInlineNodeMode, "allow-inline-node-mode", false, "let inline ephemeral volumes (any pod author) use mode: node, a mount run by this privileged plugin whose cache outlives the pod (default: PersistentVolumes only)")
	f.StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", logFormat, "auto, text or json")
	return cmd
}

// validateMountArgs checks flags from volume attributes with the mount
// command's own parser and validation, so a typo fails NodePublishVolume
// with InvalidArgument before anything is mounted.
func validateMountArgs(args []string) error {
	cfg := config.Defaults()
	fs := newMountFlagSet(&cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return cfg.Validate()
}

// newMountFlagSet is the mount command's flags on cfg, for parsing
// arguments that come from volume attributes rather than a command line.
func newMountFlagSet(cfg *config.Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("mount", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bindMountFlags(fs, cfg)
	return fs
}
