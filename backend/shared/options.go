package shared

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/stratafs/strata/backend"
)

// Store is what the tier needs from the bucket holding it: backend/s3's
// Backend in production, an in-memory fake in tests. Errors follow the
// backend package: ErrNotExist for a missing object, io.ErrUnexpectedEOF
// for a range past its end, ErrUnavailable when out of reach.
type Store interface {
	ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error)
	Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt backend.PutOptions) (backend.ObjectInfo, error)
	Stat(ctx context.Context, key string) (backend.ObjectInfo, error)
	String() string
}

// Options configure a Tier. Zero fields take DefaultOptions' values,
// except Prefix, ReadOnly and Logger.
type Options struct {
	// Prefix is where the tier's objects live in the shared bucket: "" or
	// ending in "/".
	Prefix string
	// BlockSize is the local cache's block size; required.
	BlockSize int64
	// GroupSize is the target size of one shared object: that many bytes
	// of whole blocks, at least one block, are stored together.
	GroupSize int64
	// Timeout bounds a tier GET until its headers and the read of each
	// record's body. A tier slower than that is a failure.
	Timeout time.Duration
	// Lookahead is how many shared objects one read looks up at once.
	Lookahead int
	// ReadOnly consumes the tier without ever writing to it.
	ReadOnly bool
	// WriteConcurrency is the number of background PUTs in flight.
	WriteConcurrency int
	// WriteBuffer bounds the bytes held for background writes; blocks
	// that do not fit are not written.
	WriteBuffer int64
	// WriteTimeout bounds one background PUT.
	WriteTimeout time.Duration
	// IdleFlush is how long an incomplete group may wait for its other
	// blocks before it is resolved or dropped.
	IdleFlush time.Duration
	// DrainTimeout bounds how long Close waits for queued writes.
	DrainTimeout time.Duration
	// Key, when set (at least MinKeyLen bytes), signs every record with
	// HMAC-SHA256; records that do not verify are refused (counted in
	// ForgedEntries) and read from the origin. Signed and unsigned tiers
	// use different names, so neither reads the other's entries.
	Key []byte
	// BreakerThreshold consecutive tier failures open the breaker.
	BreakerThreshold int
	// BreakerCooldown is how long an open breaker keeps reads off the
	// tier; it doubles on each failed probe up to BreakerMaxCooldown.
	BreakerCooldown, BreakerMaxCooldown time.Duration
	Logger                              *slog.Logger
}

// DefaultOptions: 1 MiB shared objects, 1 s tier timeout, 8 objects looked
// up ahead, 8 background writers with 64 MiB of buffers, a breaker that
// opens after 3 consecutive failures for 30 s (up to 5 min).
func DefaultOptions() Options {
	return Options{
		BlockSize: 1 << 20, GroupSize: 1 << 20, Timeout: time.Second, Lookahead: 8,
		WriteConcurrency: 8, WriteBuffer: 64 << 20, WriteTimeout: 30 * time.Second,
		IdleFlush: 2 * time.Second, DrainTimeout: 15 * time.Second,
		BreakerThreshold: 3, BreakerCooldown: 30 * time.Second, BreakerMaxCooldown: 5 * time.Minute,
	}
}

var errOptions = errors.New("shared: invalid options")

func (o *Options) fill() error {
	d := DefaultOptions()
	backend.OrDefault(&o.BlockSize, d.BlockSize)
	backend.OrDefault(&o.GroupSize, d.GroupSize)
	backend.OrDefault(&o.Timeout, d.Timeout)
	backend.OrDefault(&o.Lookahead, d.Lookahead)
	backend.OrDefault(&o.WriteConcurrency, d.WriteConcurrency)
	backend.OrDefault(&o.WriteBuffer, d.WriteBuffer)
	backend.OrDefault(&o.WriteTimeout, d.WriteTimeout)
	backend.OrDefault(&o.IdleFlush, d.IdleFlush)
	backend.OrDefault(&o.DrainTimeout, d.DrainTimeout)
	backend.OrDefault(&o.BreakerThreshold, d.BreakerThreshold)
	backend.OrDefault(&o.BreakerCooldown, d.BreakerCooldown)
	backend.OrDefault(&o.BreakerMaxCooldown, d.BreakerMaxCooldown)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Prefix != "" && o.Prefix[len(o.Prefix)-1] != '/':
		return fmt.Errorf("%w: prefix %q must be empty or end in /", errOptions, o.Prefix)
	case o.BlockSize > 1<<30:
		return fmt.Errorf("%w: block size %d", errOptions, o.BlockSize)
	case o.GroupSize/o.BlockSize > 1<<16:
		return fmt.Errorf("%w: group of %d blocks (at most 65536)", errOptions, o.GroupSize/o.BlockSize)
	case o.WriteBuffer < o.BlockSize:
		o.WriteBuffer = o.BlockSize
	}
	return nil
}
