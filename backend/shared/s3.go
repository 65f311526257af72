package shared

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/s3"
)

// S3Options are the connection settings of a tier held in an S3 bucket
// (an S3 Express One Zone directory bucket, or any S3-compatible store).
type S3Options struct {
	Endpoint       string // "" for AWS
	Region         string
	Profile        string
	ForcePathStyle bool
	// AccessKeyID and SecretAccessKey are static credentials; empty uses
	// the standard chain (with Profile).
	AccessKeyID, SecretAccessKey string
	// Timeout bounds each request until its response headers and each
	// stall of a body; 0 takes DefaultOptions().Timeout.
	Timeout time.Duration
	// WriteTimeout bounds one PUT; 0 takes DefaultOptions().WriteTimeout.
	WriteTimeout time.Duration
	// MaxConns is the connection pool size; 0 takes backend/s3's default.
	MaxConns int
}

// NewS3 returns the client of a tier in bucket. Unlike an origin, a tier
// is never retried: one attempt per request, bounded by Timeout, so that a
// tier in trouble costs a read one Timeout at most before the origin
// serves it, and the breaker then keeps reads off it.
func NewS3(ctx context.Context, bucket string, o S3Options) (*s3.Backend, error) {
	d := DefaultOptions()
	if o.Timeout <= 0 {
		o.Timeout = d.Timeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = d.WriteTimeout
	}
	so := s3.DefaultOptions()
	so.Endpoint, so.Region, so.Profile, so.ForcePathStyle = o.Endpoint, o.Region, o.Profile, o.ForcePathStyle
	so.AccessKeyID, so.SecretAccessKey = o.AccessKeyID, o.SecretAccessKey
	so.MaxAttempts = 1
	so.RequestTimeout = o.Timeout
	so.ReadStallTimeout = o.Timeout
	so.ReadResumes = -1 // a broken body is a failed lookup, not something to resume
	so.TransferTimeout = o.WriteTimeout
	if o.MaxConns > 0 {
		so.MaxConns = o.MaxConns
	}
	return s3.New(ctx, bucket, so)
}

// markerText is the marker object's content: constant, so that every
// mount writes the same bytes.
const markerText = `{"format":"strata1","what":"Strata shared block cache. Objects under strata1/ are ` +
	`immutable cache entries; any of them may be deleted at any time (use a lifecycle expiration rule)."}` + "\n"

// Check proves at mount that the tier works: it writes the marker object
// (PREFIX strata1/_strata_shared_cache) and reads it back; with readOnly
// it only asks for the marker's metadata (missing is fine). Errors keep
// the backend sentinels: ErrUnavailable (or a deadline) means out of
// reach, ErrAccessDenied and ErrNoBucket a configuration to fix.
func Check(ctx context.Context, store Store, prefix string, readOnly bool) error {
	key := MarkerKey(prefix)
	if readOnly {
		if _, err := store.Stat(ctx, key); err != nil && !isNotExist(err) {
			return fmt.Errorf("shared: read %s in %s: %w", key, store, err)
		}
		return nil
	}
	want := []byte(markerText)
	if _, err := store.Put(ctx, key, bytes.NewReader(want), int64(len(want)), backend.PutOptions{}); err != nil {
		return fmt.Errorf("shared: write %s to %s: %w", key, store, err)
	}
	body, err := store.ReadRange(ctx, key, "", 0, int64(len(want)))
	if err != nil {
		return fmt.Errorf("shared: read back %s from %s: %w", key, store, err)
	}
	defer body.Close()
	got, err := io.ReadAll(io.LimitReader(body, int64(len(want))+1))
	if err != nil {
		return fmt.Errorf("shared: read back %s from %s: %w", key, store, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("shared: %s in %s reads back different bytes than were written: %w", key, store, ErrBadRecord)
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, backend.ErrNotExist) }
