// Command soak is `make soak`: 64 readers over mixed small and large files
// on a real strata mount of a MinIO bucket for a bounded time, with the
// cache smaller than the data so fetching and eviction never stop. It
// checks every byte read and samples the mount process (RSS, threads,
// open descriptors, goroutines from --metrics-addr), and fails (exit 1)
// on a wrong byte, a read error, RSS past the memory limit plus an
// allowance or growing phase over phase, or descriptors, threads or
// goroutines growing from one idle point to the next (a leak).
//
//	soak [-duration 3m] [-readers 64] [-out soak.json]
//
// It needs root and /dev/fuse, and bin/minio and bin/strata (make tools
// build); -bin or STRATA_BIN_DIR points elsewhere.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

type config struct {
	duration     time.Duration
	readers      int
	small, large int
	memoryLimit  int64
	cacheSize    int64
	rssAllowance int64
	idle         time.Duration
	out          string
}

func main() {
	var c config
	var memMiB, cacheMiB, allowMiB int64
	bin := flag.String("bin", "", "directory holding strata and minio (default $STRATA_BIN_DIR, else <repo>/bin)")
	flag.DurationVar(&c.duration, "duration", 3*time.Minute, "load time, in three phases with idle pauses between")
	flag.IntVar(&c.readers, "readers", 64, "concurrent readers")
	flag.IntVar(&c.small, "small", 3000, "small files (1-64 KiB)")
	flag.IntVar(&c.large, "large", 24, "large files (8-48 MiB)")
	flag.Int64Var(&memMiB, "memory-limit", 128, "the mount's --memory-limit, MiB")
	flag.Int64Var(&cacheMiB, "cache-size", 384, "the mount's --cache-size, MiB (smaller than the data: eviction runs)")
	flag.Int64Var(&allowMiB, "rss-allowance", 384, "RSS allowed above the memory limit (runtime, index, page tables), MiB")
	flag.DurationVar(&c.idle, "idle", 8*time.Second, "pause between phases, after which leaks are counted")
	flag.StringVar(&c.out, "out", "", "write the report as JSON here")
	flag.Parse()
	c.memoryLimit, c.cacheSize, c.rssAllowance = memMiB<<20, cacheMiB<<20, allowMiB<<20
	if *bin != "" {
		os.Setenv("STRATA_BIN_DIR", *bin)
	}
	os.Setenv("STRATA_E2E", "1") // a missing binary is an error, not a skip
	rep, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	rep.print(os.Stdout)
	if c.out != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.out, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
		}
	}
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
}

// run sets up MinIO, the data and the mount, then drives the load.
func run(c config) (rep *report, err error) {
	env := newEnv()
	defer env.cleanup()
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(fatal); ok {
				err = f
				return
			}
			panic(r)
		}
	}()
	mc := testserver.StartMinIO(env)
	bucket := mc.NewBucket(env)
	ds := dataset{small: c.small, large: c.large}
	start := time.Now()
	if err := ds.upload(mc, bucket); err != nil {
		return nil, err
	}
	fmt.Printf("soak: %d files, %d MiB uploaded in %v\n", ds.count(), ds.bytes()>>20, time.Since(start).Round(time.Second))

	m, err := mountBucket(env, mc, bucket, c)
	if err != nil {
		return nil, err
	}
	defer m.unmount()
	rep = &report{Config: c.String(), Files: ds.count(), DataBytes: ds.bytes()}
	s := newSampler(m)
	stop := s.start(2 * time.Second)
	idle := func(label string) {
		time.Sleep(c.idle)
		rep.Idle = append(rep.Idle, s.sample(label))
	}
	rep.LoadAvgStart = loadAvg()
	idle("before")
	for phase := range 3 {
		st := readLoad(m.dir, ds, c.readers, c.duration/3, uint64(phase))
		rep.Phases = append(rep.Phases, st)
		fmt.Printf("soak: phase %d: %s\n", phase+1, st)
		idle(fmt.Sprintf("after phase %d", phase+1))
	}
	stop()
	rep.Samples = s.all()
	if !m.alive() {
		rep.Failures = append(rep.Failures, "the mount process died")
	}
	rep.evaluate(c)
	rep.LoadAvg = loadAvg()
	if len(rep.Failures) > 0 { // keep the mount's log, the soak's directory goes
		if b, err := os.ReadFile(filepath.Join(m.cacheDir, "strata.log")); err == nil {
			p := filepath.Join(os.TempDir(), fmt.Sprintf("strata-soak-%d.log", time.Now().Unix()))
			if os.WriteFile(p, b, 0o644) == nil {
				rep.Log = p
			}
		}
	}
	return rep, nil
}

// loadAvg is /proc/loadavg: the soak shares the machine with whatever runs.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return string(bytes.TrimSpace(b))
}

func (c config) String() string {
	return fmt.Sprintf("%v, %d readers, memory-limit %d MiB, cache-size %d MiB", c.duration, c.readers, c.memoryLimit>>20, c.cacheSize>>20)
}

// tempRoot is where the soak keeps MinIO's data, the cache and the mountpoint.
func tempRoot() string {
	d, err := os.MkdirTemp("", "strata-soak-")
	if err != nil {
		panic(fatal(err))
	}
	return d
}

func cacheDirOf(root string) string { return filepath.Join(root, "cache") }
