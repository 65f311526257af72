package shared

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/internal/testserver"
)

// BenchmarkGroupSize measures what grouping blocks into larger shared
// objects buys on a real S3 server (MinIO on loopback): node A fills the
// tier from an in-memory origin, node B reads the same data back the way
// the fetcher does (8 MiB ranged reads, 8 at a time). Reported per
// configuration: fill and read throughput, and PUTs and GETs per GiB.
//
//	STRATA_BIN_DIR=$PWD/bin go test -run XXX -bench GroupSize -benchtime 1x ./backend/shared/
func BenchmarkGroupSize(b *testing.B) {
	m := startMinIO(b)
	const total = 128 << 20
	for _, c := range []struct{ block, group int64 }{
		{64 << 10, 64 << 10}, {64 << 10, 256 << 10}, {64 << 10, 512 << 10}, {64 << 10, 1 << 20}, {64 << 10, 4 << 20},
		{1 << 20, 1 << 20}, {1 << 20, 4 << 20}, {1 << 20, 8 << 20},
	} {
		b.Run(fmt.Sprintf("block=%dKiB/object=%dKiB", c.block>>10, c.group>>10), func(b *testing.B) {
			for range b.N {
				benchGroup(b, m, c.block, c.group, total)
			}
		})
	}
}

func benchGroup(b *testing.B, m *testserver.MinIO, block, group, total int64) {
	ctx := context.Background()
	files := map[string][]byte{}
	const nfiles = 8
	for i := range nfiles {
		files[fmt.Sprintf("f%d", i)] = payload(100+i, int(total/nfiles))
	}
	org := origin{newMemStore("mem://bench-origin")}
	for k, v := range files {
		org.putRaw(k, v)
	}
	bucket := m.NewBucket(b)
	o := DefaultOptions()
	o.BlockSize, o.GroupSize = block, group
	o.WriteBuffer = 256 << 20
	o.Logger = testOptions().Logger

	run := func(tier *Tier) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for k := range files {
			for off := int64(0); off < total/nfiles; off += 8 << 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rc, err := tier.Backend().ReadRange(ctx, k, "raw", off, min(8<<20, total/nfiles-off))
					if err != nil {
						b.Error(err)
						return
					}
					defer rc.Close()
					if _, err := io.Copy(io.Discard, rc); err != nil {
						b.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		return time.Since(start)
	}
	a, err := New(org, minioTier(b, m, bucket, 5*time.Second), o)
	if err != nil {
		b.Fatal(err)
	}
	fill := run(a)
	start := time.Now()
	a.Close()
	fill += time.Since(start)
	sa := a.Stats().Snapshot()

	nb, err := New(org, minioTier(b, m, bucket, 5*time.Second), o)
	if err != nil {
		b.Fatal(err)
	}
	read := run(nb)
	sb := nb.Stats().Snapshot()
	nb.Close()
	if sb.MissBlocks != 0 || sa.WritesDropped != 0 {
		b.Fatalf("node B missed %d blocks; node A dropped %d writes", sb.MissBlocks, sa.WritesDropped)
	}
	gib := float64(total) / (1 << 30)
	b.ReportMetric(float64(total)/fill.Seconds()/1e6, "fill-MB/s")
	b.ReportMetric(float64(total)/read.Seconds()/1e6, "read-MB/s")
	b.ReportMetric(float64(sa.Writes)/gib, "PUTs/GiB")
	b.ReportMetric(float64(sb.Shared.Requests)/gib, "GETs/GiB")
}
