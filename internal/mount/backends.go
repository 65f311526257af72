package mount

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/gcs"
	"github.com/stratafs/strata/backend/local"
	"github.com/stratafs/strata/backend/s3"
	"github.com/stratafs/strata/internal/config"
)

// openBackend builds the backend for src with the connection settings of
// cfg. Backends retry internally; the attempt counts here bound how long a
// dead endpoint can hold a metadata request. A read is bounded by the
// fetcher's ResponseTimeout (8 s, retries included: README's "EIO within
// 10 seconds"); an S3 GET attempt waits 3 s for headers, so that a lost
// request is retried well within it.
func openBackend(ctx context.Context, src config.Source, cfg *config.Config) (backend.Backend, error) {
	switch src.Scheme {
	case "s3":
		o := s3.DefaultOptions()
		o.Endpoint = cfg.EndpointURL
		o.Region = cfg.Region
		o.Profile = cfg.Profile
		o.ForcePathStyle = cfg.ForcePathStyle
		o.NoSignRequest = cfg.NoSignRequest
		o.MaxAttempts = 5
		o.MaxBackoff = 2 * time.Second
		o.ResponseTimeout = 3 * time.Second
		// A broken or stalled body is not resumed by the backend: its new
		// GET would wait out every SDK attempt (about 20 s against a
		// silent network) with nothing bounding it, and the fetcher then
		// sent its own. The fetcher resumes the GET itself, from the
		// first block not yet read, within its 8 s bound and its breaker:
		// README's "a transfer under way when the network goes silent"
		// fails 30 s + 8 s later, not 60 s (TestTransferGoesSilent).
		o.ReadResumes = -1
		o.MaxConns = max(o.MaxConns, 2*cfg.MaxFetches)
		return asBackend(s3.New(ctx, src.Bucket, o))
	case "gs":
		o := gcs.DefaultOptions()
		o.Endpoint = cfg.EndpointURL
		o.KeyFile = cfg.KeyFile
		o.Anonymous = cfg.Anonymous
		o.MaxAttempts = 5
		return asBackend(gcs.New(ctx, src.Bucket, o))
	case "file":
		// Files written through the mount get the mount's modes, as
		// they show in it (--file-mode, --dir-mode).
		o := local.DefaultOptions()
		o.FileMode, o.DirMode = os.FileMode(cfg.FileMode).Perm(), os.FileMode(cfg.DirMode).Perm()
		return asBackend(local.New(src.Path, o))
	}
	return nil, fmt.Errorf("unknown scheme %q", src.Scheme)
}

// asBackend turns a constructor's (*T, error) into a Backend that is nil
// on error: never a typed nil, on which a deferred Close would panic.
func asBackend[T backend.Backend](be T, err error) (backend.Backend, error) {
	if err != nil {
		return nil, err
	}
	return be, nil
}
