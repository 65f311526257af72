package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

const bucket = "strata-demo"

// Result is what the demo measured.
type Result struct {
	Cfg      Config
	Machine  workload.Machine
	Files    int
	Bytes    int64
	Server   string
	Command  string
	Epoch1   workload.Summary
	Epoch2   workload.Summary
	Local    workload.Summary
	Verified int64
	// Stats1 and Stats2 are strata's counters for each epoch; Final is the
	// whole session (nil for peers or when stats failed).
	Stats1, Stats2, Final *workload.CacheStats
	StatsErr              error
	DropErr               error
}

// demo holds the run's state and its cleanup stack.
type demo struct {
	cfg     Config
	out     io.Writer
	work    string
	cleanup []func(context.Context) error
}

// run is the whole demo. Cleanup (unmount, stop the server, remove the
// temporary directory) runs on every exit path, with its own time limit.
func run(ctx context.Context, cfg Config, out io.Writer) (*Result, error) {
	d := &demo{cfg: cfg, out: out}
	res := &Result{Cfg: cfg}
	err := d.steps(ctx, res)
	if ctx.Err() != nil {
		fmt.Fprintln(out, "\ninterrupted: cleaning up")
	}
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cerr error
	for i := len(d.cleanup) - 1; i >= 0; i-- {
		cerr = errors.Join(cerr, d.cleanup[i](cctx))
	}
	if err == nil {
		writeReport(out, res)
		d.say("cleaned up: unmounted, server stopped%s", map[bool]string{true: ", " + d.work + " kept", false: ", files removed"}[cfg.Keep || cfg.WorkDir != ""])
	}
	return res, errors.Join(err, cerr)
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, format+"\n", args...) }

// step runs fn and prints how long it took.
func (d *demo) step(what string, fn func() (string, error)) error {
	fmt.Fprintf(d.out, "• %s ... ", what)
	t0 := time.Now()
	detail, err := fn()
	if err != nil {
		fmt.Fprintln(d.out, "failed")
		return fmt.Errorf("%s: %w", what, err)
	}
	if detail != "" {
		detail = ", " + detail
	}
	fmt.Fprintf(d.out, "done (%s%s)\n", time.Since(t0).Round(10*time.Millisecond), detail)
	return nil
}

func (d *demo) steps(ctx context.Context, res *Result) error {
	cfg := d.cfg
	if err := d.workdir(); err != nil {
		return err
	}
	res.Machine = workload.DescribeMachine(d.work)
	d.say("Strata demo on %s", res.Machine)
	if res.DropErr = workload.DropPageCache(); res.DropErr != nil {
		d.say("note: cannot drop the page cache here (%v): epoch 2 may be served from RAM", res.DropErr)
	}
	ds := workload.Dataset{Seed: cfg.Seed,
		ImageFolder: &workload.ImageFolderSpec{Prefix: "train", Files: cfg.Files, Dirs: cfg.Dirs, Size: cfg.FileSize, Jitter: 0.25}}
	if cfg.Large > 0 {
		ds.BigFiles = &workload.BigFileSpec{Prefix: "large", Count: cfg.Large, Size: cfg.LargeSize}
	}
	dataDir := filepath.Join(d.work, "source")
	var m *workload.Manifest
	err := d.step("generating the dataset", func() (string, error) {
		var err error
		m, err = workload.Generate(ctx, dataDir, ds, nil)
		if err != nil {
			return "", err
		}
		res.Files, res.Bytes = len(m.Files), workload.TotalSize(m.Files)
		return fmt.Sprintf("%d files, %s in %s", res.Files, workload.FormatSize(res.Bytes), dataDir), nil
	})
	if err != nil {
		return err
	}
	spec, err := d.server(ctx, res, dataDir, m)
	if err != nil {
		return err
	}
	mnt, err := d.mount(ctx, res, spec)
	if err != nil {
		return err
	}
	return d.measure(ctx, res, m, mnt, spec, dataDir)
}

// workdir creates the work directory (a temporary one unless given).
func (d *demo) workdir() error {
	if d.cfg.WorkDir != "" {
		d.work = d.cfg.WorkDir
		return os.MkdirAll(d.work, 0o755)
	}
	dir, err := os.MkdirTemp("", "strata-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.work = dir
	if !d.cfg.Keep {
		d.cleanup = append(d.cleanup, func(context.Context) error { return os.RemoveAll(dir) })
	}
	return nil
}

// server starts MinIO or fake-gcs-server, uploads the dataset and returns
// the mount spec.
func (d *demo) server(ctx context.Context, res *Result, dataDir string, m *workload.Manifest) (workload.MountSpec, error) {
	spec := workload.MountSpec{Bucket: bucket, CacheDir: filepath.Join(d.work, "cache"),
		Mountpoint: filepath.Join(d.work, "mnt"), LogPath: filepath.Join(d.work, "logs", "mount.log")}
	srvDir := filepath.Join(d.work, "server")
	if err := os.MkdirAll(filepath.Join(d.work, "logs"), 0o755); err != nil {
		return spec, fmt.Errorf("demo: %w", err)
	}
	var put workload.PutFunc
	if d.cfg.Backend == "gcs" {
		var f *workload.FakeGCS
		err := d.step("starting fake-gcs-server", func() (string, error) {
			var err error
			if f, err = workload.StartFakeGCS(ctx, srvDir); err != nil {
				return "", err
			}
			d.cleanup = append(d.cleanup, func(context.Context) error { return f.Stop() })
			return f.Endpoint, f.MakeBucket(ctx, bucket)
		})
		if err != nil {
			return spec, err
		}
		spec.Scheme, spec.Endpoint = "gs", f.Endpoint
		res.Server = "fake-gcs-server at " + f.Endpoint
		put = workload.GCSPut(f.Endpoint, bucket)
	} else {
		var s *workload.MinIO
		err := d.step("starting MinIO", func() (string, error) {
			var err error
			if s, err = workload.StartMinIO(ctx, srvDir); err != nil {
				return "", err
			}
			d.cleanup = append(d.cleanup, func(context.Context) error { return s.Stop() })
			cfg := workload.S3Config{Endpoint: s.Endpoint, Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey}
			client := workload.NewS3Client(cfg)
			put = workload.S3Put(client, bucket)
			return s.Endpoint, workload.EnsureBucket(ctx, client, bucket)
		})
		if err != nil {
			return spec, err
		}
		spec.Endpoint, spec.Region, spec.AccessKey, spec.SecretKey = s.Endpoint, s.Region, s.AccessKey, s.SecretKey
		res.Server = "MinIO at " + s.Endpoint
	}
	err := d.step(fmt.Sprintf("uploading %d objects to %s://%s", len(m.Files), map[bool]string{true: "gs", false: "s3"}[d.cfg.Backend == "gcs"], bucket), func() (string, error) {
		t0 := time.Now()
		if err := workload.Upload(ctx, put, dataDir, m.Files, 32, nil); err != nil {
			return "", err
		}
		return fmt.Sprintf("%.0f MB/s", float64(res.Bytes)/1e6/time.Since(t0).Seconds()), nil
	})
	return spec, err
}

// mount mounts the bucket and registers the unmount.
func (d *demo) mount(ctx context.Context, res *Result, spec workload.MountSpec) (*workload.Mount, error) {
	var mounter workload.Mounter
	switch d.cfg.Mounter {
	case "rclone":
		mounter = &workload.Rclone{}
	case "s3fs":
		mounter = &workload.S3fs{}
	default:
		// The command a user types: it returns once mounted.
		mounter = &workload.Strata{Background: true}
	}
	if err := mounter.Available(ctx); err != nil {
		return nil, fmt.Errorf("%s is not usable here: %w", mounter.Name(), err)
	}
	var mnt *workload.Mount
	err := d.step("mounting "+spec.Source()+" with "+mounter.Name(), func() (string, error) {
		var err error
		if mnt, err = mounter.Mount(ctx, spec); err != nil {
			return "", err
		}
		d.cleanup = append(d.cleanup, func(ctx context.Context) error { return mnt.Unmount(ctx) })
		return "", nil
	})
	if err != nil {
		return nil, err
	}
	res.Command = mnt.Command
	if spec.SecretKey != "" {
		res.Command = replaceAll(res.Command, spec.SecretKey, "***")
	}
	d.say("  %s", res.Command)
	return mnt, nil
}
