package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratafs/strata/internal/cachetools"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/control"
	"github.com/stratafs/strata/internal/mount"
	"github.com/stratafs/strata/internal/warm"
)

// warmFlags are warm's own options (the backend and cache flags are the
// mount's).
type warmFlags struct {
	prefix   string
	fromList string
	interval time.Duration
	asJSON   bool
}

func warmCmd() *cobra.Command {
	cfg := config.Defaults()
	var wf warmFlags
	cmd := &cobra.Command{
		Use:   "warm [flags] SOURCE",
		Short: "Hydrate objects into the cache before training (resumable)",
		Long: `Fetch every object under SOURCE (or the ones --prefix or --from-list name)
into the cache directory, in parallel, within --memory-limit. Blocks already
cached are skipped, so an interrupted warm resumes where it stopped.

If a mount is serving the cache directory, the mount does the work (warming
runs at background priority, behind the training job's own reads) and its
progress is shown here; otherwise warm opens the cache directory itself.
Use the same --cache-dir (and endpoint flags) as the mount.`,
		Example: `  strata warm s3://datasets/imagenet --cache-dir /nvme/strata
  strata warm s3://datasets/imagenet --cache-dir /nvme/strata --prefix train/
  strata warm gs://bucket/shards --cache-dir /nvme/strata --from-list epoch0.txt`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := applyConfigFile(cmd.Flags()); err != nil {
				return err
			}
			return runWarm(cmd.Context(), &cfg, wf, args[0], cmd.Flags().Changed("block-size"))
		},
	}
	bindMountFlags(cmd.Flags(), &cfg)
	// The mount's other flags are accepted (a config file shared with the
	// mount applies) but mean nothing to warm: not in its --help.
	cmd.Flags().VisitAll(func(f *pflag.Flag) { f.Hidden = !warmHonours(f.Name) })
	cmd.Flags().StringVar(&wf.prefix, "prefix", "", "warm only keys starting with this prefix, relative to SOURCE (e.g. train/ or train/shard-00)")
	cmd.Flags().StringVar(&wf.fromList, "from-list", "", "warm the files and directories listed in FILE, one path relative to SOURCE per line (- for stdin)")
	cmd.Flags().DurationVar(&wf.interval, "progress-interval", config.Tools().ProgressInterval, "how often to print a progress line when not on a terminal")
	cmd.Flags().BoolVar(&wf.asJSON, "json", false, "print the final report as JSON")
	return cmd
}

// warmMountFlags are the mount flags warm acts on: where the bytes come
// from (backend and shared tier), the cache, how it fetches, its log
// level, and the config file.
var warmMountFlags = map[string]bool{
	"cache-dir": true, "cache-size": true, "metadata-ttl": true, "block-size": true, "io-engine": true,
	"memory-limit": true, "part-size": true, "max-fetches": true, "warm-concurrency": true,
	"endpoint-url": true, "region": true, "profile": true, "force-path-style": true, "no-sign-request": true,
	"key-file": true, "anonymous": true, "log-level": true, "config": true,
}

func warmHonours(name string) bool {
	return warmMountFlags[name] || strings.HasPrefix(name, "shared-cache")
}

// readList reads --from-list: one path per line, taken as it is (spaces
// are valid in keys: only a CRLF file's \r is dropped); blank lines and
// lines starting with # are skipped.
func readList(name string) ([]string, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("--from-list: %w", err)
		}
		defer f.Close()
		r = f
	}
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--from-list %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--from-list %s: no paths in it", name)
	}
	return out, nil
}

func runWarm(ctx context.Context, cfg *config.Config, wf warmFlags, source string, blockSizeSet bool) error {
	src, err := config.ParseSource(source)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if wf.prefix != "" && wf.fromList != "" {
		return errors.New("use --prefix or --from-list, not both")
	}
	var paths []string
	if wf.fromList != "" {
		if paths, err = readList(wf.fromList); err != nil {
			return err
		}
	}
	if err := mount.ResolveCacheDir(cfg, src); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	pp := newProgressPrinter(os.Stderr, "warm", wf.interval)
	show := func(p warm.Progress) {
		pp.update(progressState{Objects: p.Objects, DoneObjects: p.DoneObjects, Bytes: p.Bytes, DoneBytes: p.DoneBytes, Listing: p.Listing, Failed: p.Failed + p.FailedPaths})
	}
	var final warm.Progress
	var via string
	if _, statErr := os.Stat(filepath.Join(cfg.CacheDir, "index")); statErr == nil {
		conn, holder, oerr := control.Owner(cfg.CacheDir)
		switch {
		case oerr != nil:
			return oerr
		case conn != nil:
			defer conn.Close()
			req := control.Request{Op: "warm", Source: src.String(), Endpoint: cfg.EndpointURL, Prefix: wf.prefix, Paths: paths, Concurrency: cfg.Ops.WarmConcurrency}
			fmt.Fprintf(os.Stderr, "warm: %s is in use by %s: warming through its control socket\n", cfg.CacheDir, holder)
			go func() { <-ctx.Done(); conn.Close() }()
			err = conn.Call(req, func(raw json.RawMessage) {
				var p warm.Progress
				if json.Unmarshal(raw, &p) == nil {
					final = p
					show(p)
				}
			}, &final)
			via = fmt.Sprintf(" by the mount on %s (pid %d)", conn.Hello.Mountpoint, conn.Hello.PID)
			if ctx.Err() != nil {
				err = fmt.Errorf("warm interrupted; run it again to resume")
			}
			pp.done()
			return warmReport(final, err, via, wf.asJSON)
		}
	}
	fmt.Fprintf(os.Stderr, "warm: %s into %s\n", src, cfg.CacheDir)
	final, err = warmOffline(ctx, cfg, src, warm.Request{Prefix: wf.prefix, Paths: paths, Concurrency: cfg.Ops.WarmConcurrency}, blockSizeSet, show)
	pp.done()
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("warm interrupted; run it again to resume")
	}
	return warmReport(final, err, via, wf.asJSON)
}

// warmLine is the report's sentence: objects warmed of those found, and
// the listed paths that led to none apart.
func warmLine(p warm.Progress, via string) string {
	el := time.Duration(p.Elapsed * float64(time.Second))
	rate := ""
	if p.Elapsed > 0 {
		rate = fmt.Sprintf(" (%s/s)", sizeStr(int64(float64(p.Fetched())/p.Elapsed)))
	}
	line := fmt.Sprintf("warmed %d of %d objects (%s of %s) in %s%s: fetched %s%s, %s were already cached",
		p.Warmed(), p.Objects, sizeStr(p.DoneBytes), sizeStr(p.Bytes), fmtDuration(el), via,
		sizeStr(p.Fetched()), rate, sizeStr(p.Skipped))
	if p.FailedPaths > 0 {
		line += fmt.Sprintf("; %d listed paths not found or not listable", p.FailedPaths)
	}
	return line
}

// warmReport prints the outcome: a sentence (or JSON) on stdout, then the
// error if any.
func warmReport(p warm.Progress, err error, via string, asJSON bool) error {
	if asJSON {
		err = errors.Join(err, printJSON(p))
	} else if p.Objects > 0 || p.FailedPaths > 0 || err == nil {
		fmt.Println(warmLine(p, via))
	}
	if p.Warning != "" {
		fmt.Fprintln(os.Stderr, "warm: warning: "+p.Warning)
	}
	return err
}

// warmOffline warms a cache dir nobody holds.
func warmOffline(ctx context.Context, cfg *config.Config, src config.Source, req warm.Request, blockSizeSet bool, show func(warm.Progress)) (warm.Progress, error) {
	if !blockSizeSet {
		if bs, ok := cachetools.BlockSize(cfg.CacheDir); ok {
			cfg.BlockSize = config.Size(bs)
			if cfg.PartSize < cfg.BlockSize {
				cfg.PartSize = cfg.BlockSize
			}
		}
	}
	level := "warn" // info lines would break the progress bar
	if cfg.LogLevel == "debug" || cfg.LogLevel == "error" {
		level = cfg.LogLevel
	}
	log := newLogger(os.Stderr, level, "text")
	made := mount.PlanDirs(cfg.CacheDir)
	s, err := mount.Open(ctx, mount.Options{Config: cfg, Source: src, Owner: "warm " + src.String(), Logger: log})
	if err != nil {
		made.Undo() // refused before warming anything: leave no cache dir behind
		return warm.Progress{}, err
	}
	p, err := s.WarmJob(req).Run(ctx, show)
	s.Close()
	if errors.Is(err, warm.ErrNothingToWarm) {
		made.Undo() // nothing was warmed into it either
	}
	return p, err
}
