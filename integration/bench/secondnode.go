package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/stratafs/strata/integration/workload"
)

// secondNodeName is the system of issue #9's "second node" row.
const secondNodeName = "strata-2nd"

// secondNodeSystem is strata on a node whose local cache is empty but
// whose shared cache tier (--shared-cache) another node has already
// filled: issue #9's "second node" row, read against strata's own rows
// (origin-cold). The tier is a bucket on the benchmark's MinIO reached
// directly, without the latency proxy: a zonal store next to the nodes
// (S3 Express One Zone, an in-cluster MinIO) in front of a distant origin.
//
// Open mounts a first node with the tier, reads the whole prefix through
// it (untimed), unmounts it and drops its local cache, then mounts the
// second node on a fresh local cache. Fresh keeps the tier: every cold
// phase of this system is a second node's. What remains of the origin's
// latency in its cold rows is metadata (lookups and listings), which the
// tier does not hold.
func secondNodeSystem(cfg Config) System {
	base := &workload.Strata{Flags: cfg.StrataFlags}
	version := func(ctx context.Context) string {
		return base.Version(ctx) + ", --shared-cache on the same MinIO without added latency, filled by a first node"
	}
	return System{Name: secondNodeName, Role: RoleSubject, Available: base.Available, Version: version, GCS: true,
		// Listings and writes do not touch the tier (and filling it for
		// the listing's 100,000 keys would take a first node minutes);
		// the DataLoader's reads are the ImageFolder's, at a cost in time.
		Runs: except("checkpoint", "listing", "listing-deep", "dataloader", "webdataset-py", "au-resnet50", "au-unet3d"),
		Open: func(ctx context.Context, e *Env, o OpenOpts) (FS, error) {
			prefix, tag := o.Prefix, o.Tag
			tierBucket := e.Bucket(prefix) + "-shared"
			if err := workload.EnsureBucket(ctx, workload.NewS3Client(e.s3(e.MinIO.Endpoint)), tierBucket); err != nil {
				return nil, err
			}
			// A prefix per run and tag: every row starts from a tier
			// filled by its own first node, never by an earlier row.
			tierURL := fmt.Sprintf("s3://%s/%s-%d", tierBucket, strings.ReplaceAll(tag, "/", "-"), os.Getpid())
			withTier := &workload.Strata{Flags: append(append([]string{}, cfg.StrataFlags...),
				"--shared-cache", tierURL, "--shared-cache-endpoint-url", e.MinIO.Endpoint,
				"--shared-cache-force-path-style", "--shared-cache-region", e.MinIO.Region)}
			nodes := mountSystem(withTier, RoleSubject, nil, nil, true)
			// The first node gets room to write everything it reads: a
			// node reading faster than the tier absorbs drops writes (by
			// design), which would leave this row's tier partly cold.
			filler := &workload.Strata{Flags: append(append([]string{}, withTier.Flags...), "--shared-cache-write-buffer", "1GiB")}
			first, err := mountSystem(filler, RoleSubject, nil, nil, true).Open(ctx, e, OpenOpts{Prefix: prefix, Latency: o.Latency, Tag: tag + "-first"})
			if err != nil {
				return nil, fmt.Errorf("first node: %w", err)
			}
			entries := e.Manifest.Under(prefix)
			_, err = workload.ReadFiles(ctx, workload.ReadOpts{Root: first.Root(), StripPrefix: prefix, Entries: entries,
				Procs: 8, BufSize: 1 << 20})
			// Unmounting drains the first node's writes to the tier; Close
			// also removes its local cache.
			if cerr := first.Close(ctx); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("first node filling the shared cache: %w", err)
			}
			return nodes.Open(ctx, e, o)
		}}
}
