package mount

import (
	"os"
	"testing"
	"time"

	"github.com/stratafs/strata/backend/local"
	s3be "github.com/stratafs/strata/backend/s3"
	"github.com/stratafs/strata/backend/shared"
	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/cache/meta"
	"github.com/stratafs/strata/cache/writeback"
	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/csi"
	"github.com/stratafs/strata/prefetch"
)

// TestPackageDefaultsMatchTheTable: a mount fills every user-settable
// field of the packages' Options from config.Defaults (the one table).
// The packages keep DefaultOptions for their own unit tests; this fails
// when one of those drifts from the table, so a package tested with its
// defaults is tested with what a mount runs by default.
func TestPackageDefaultsMatchTheTable(t *testing.T) {
	d := config.Defaults()
	check := func(what string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s: the package default is %v, config.Defaults says %v", what, got, want)
		}
	}

	co := cache.DefaultOptions()
	check("cache BlockSize", co.BlockSize, int64(d.BlockSize))
	check("cache MinFree", co.MinFree, config.MinFreeFraction)

	mo := meta.DefaultOptions()
	check("meta TTL", mo.TTL, time.Duration(d.MetadataTTL))
	check("meta ListPrefetch", mo.ListPrefetch > 0, d.ListPrefetch)

	po := prefetch.DefaultOptions()
	check("prefetch MaxFetches", po.MaxFetches, d.MaxFetches)
	check("prefetch PartBlocks", po.PartBlocks, max(int64(d.PartSize/d.BlockSize), 1))
	check("prefetch InitialWindow", po.InitialWindow, min(1<<20, int64(d.MaxReadahead)))
	check("prefetch MaxWindow", po.MaxWindow, int64(d.MaxReadahead))
	check("prefetch SmallObject", po.SmallObject, int64(d.SmallObject))

	fo := fs.DefaultOptions()
	check("fs FileMode", fo.FileMode, uint32(d.FileMode))
	check("fs DirMode", fo.DirMode, uint32(d.DirMode))
	check("fs TTL", fo.TTL, time.Duration(d.MetadataTTL))
	check("fs RenameDirLimit", fo.RenameDirLimit, d.Write.RenameDirLimit)
	check("fs DirPrefetch", fo.DirPrefetch, d.DirPrefetch)

	wo := writeback.DefaultOptions()
	check("writeback Mode", wo.Mode, writeback.Mode(d.Write.Upload))
	check("writeback Concurrency", wo.Concurrency, d.Write.UploadConcurrency)
	check("writeback PartSize", wo.PartSize, int64(d.Write.UploadPartSize))
	check("writeback Delay", wo.Delay, d.Write.UploadDelay)
	// A sync file sent in parts while written goes up with as many parts
	// in flight as a file uploaded whole after its close (and as the
	// bench's reference upload, which claims Strata's defaults).
	check("writeback PartConcurrency", wo.PartConcurrency, s3be.DefaultOptions().UploadConcurrency)

	so := shared.DefaultOptions()
	check("shared BlockSize", so.BlockSize, int64(d.BlockSize))
	check("shared GroupSize", so.GroupSize, int64(d.Shared.GroupSize))
	check("shared Timeout", so.Timeout, d.Shared.Timeout)
	check("shared WriteConcurrency", so.WriteConcurrency, d.Shared.WriteConcurrency)
	check("shared WriteBuffer", so.WriteBuffer, int64(d.Shared.WriteBuffer))
	check("shared ReadOnly", so.ReadOnly, d.Shared.ReadOnly)

	lo := local.DefaultOptions()
	check("local FileMode", lo.FileMode, os.FileMode(d.FileMode).Perm())
	check("local DirMode", lo.DirMode, os.FileMode(d.DirMode).Perm())

	c, xo := config.CSI(), csi.DefaultOptions()
	check("csi CacheRoot", xo.CacheRoot, c.CacheRoot)
	check("csi StateDir", xo.StateDir, c.StateDir)
	check("csi HandoffTimeout", xo.HandoffTimeout, c.HandoffTimeout)
}
