package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors. Backends wrap them ("s3: stat data/x: %w") and callers
// match them with errors.Is; fs/errno.go turns them into errnos.
var (
	// ErrNotExist: the object (or prefix) does not exist.
	ErrNotExist = errors.New("object does not exist")
	// ErrVersionChanged: a read pinned to one version found another one
	// (S3 If-Match failed with 412, GCS generation mismatch).
	ErrVersionChanged = errors.New("object version changed")
	// ErrNoBucket: the bucket (or the root directory of a local source)
	// does not exist.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrAccessDenied: the credentials were refused or lack permission.
	ErrAccessDenied = errors.New("access denied")
	// ErrUnavailable: the backend could not be reached or kept failing
	// after retries (connection refused, timeouts, repeated 5xx).
	ErrUnavailable = errors.New("backend unavailable")
	// ErrPreconditionFailed: a conditional write or delete found a
	// different current version than the one it was based on.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrNotSupported: the backend does not implement an optional operation.
	ErrNotSupported = errors.New("operation not supported by backend")
	// ErrInvalidRequest: the backend refused the request itself (HTTP 400
	// and kin: a key it cannot store, a key too long, an entity too
	// large): the same request will be refused again, so it is not
	// retried.
	ErrInvalidRequest = errors.New("request refused as invalid")
)

// ObjectInfo describes one object version.
type ObjectInfo struct {
	// Key is the full key in the bucket (or the slash-separated path
	// relative to the root of a local source).
	Key string
	// Size in bytes.
	Size int64
	// MTime is the last-modified time reported by the backend.
	MTime time.Time
	// Version identifies the content: the ETag on S3 (quotes stripped),
	// the generation on GCS, a size+mtime+inode fingerprint on local
	// directories. Two ObjectInfos with the same Key and Version have the
	// same bytes.
	Version string
}

// ListOptions shape one List call.
type ListOptions struct {
	// Token continues a listing; "" starts at the beginning.
	Token string
	// Recursive lists every key under the prefix (no delimiter): Prefixes
	// stays empty.
	Recursive bool
	// Limit caps the entries (objects plus prefixes) in this page;
	// 0 lets the backend choose (1000 on S3).
	Limit int
}

// ListPage is one page of a listing. Objects and Prefixes are each sorted
// by key in byte order, and every entry of a page sorts before every entry
// of the next page: a caller can merge them into one ordered stream.
type ListPage struct {
	// Objects directly under the prefix (or, when Recursive, every object
	// under it). A key equal to the prefix itself (a "folder" placeholder
	// such as "dir/") is included; namespace code decides what it means.
	Objects []ObjectInfo
	// Prefixes are the common prefixes one level down, each ending in "/".
	Prefixes []string
	// Next is the token for the next page, "" when the listing is done.
	Next string
}

// Backend is the read side every source offers. All methods are safe for
// concurrent use, honour ctx cancellation, retry transient failures
// internally (with backoff and jitter) and bound each attempt in time.
type Backend interface {
	// Stat returns the current version of key, or ErrNotExist.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// List returns one page of the keys under prefix. prefix is "" or
	// ends in "/". A bucket that does not exist is ErrNoBucket.
	List(ctx context.Context, prefix string, opt ListOptions) (ListPage, error)

	// ReadRange streams n bytes of key starting at off, from exactly the
	// given version (ErrVersionChanged otherwise; version "" means any).
	// The caller keeps off+n within the object's size. The reader returns
	// an error (never a silent short read) if the body ends early.
	ReadRange(ctx context.Context, key, version string, off, n int64) (io.ReadCloser, error)

	// String names the source for logs and cache identity, without
	// secrets: "s3://bucket@endpoint", "gs://bucket", "file:///path".
	String() string
}

// HeadReader is implemented by backends that can answer a lookup and a
// small file's read in one request. Every wrapper (Base) implements it
// and returns ErrNotSupported when what it wraps does not.
type HeadReader interface {
	// ReadHead returns key's current version, as Stat does, and its first
	// n bytes (all of them when the object is smaller) from one GET:
	// where a HEAD and a GET would take two round trips. A key that does
	// not exist is ErrNotExist.
	ReadHead(ctx context.Context, key string, n int64) (ObjectInfo, []byte, error)
}

// ReadHead is be's ReadHead, or ErrNotSupported when be has none.
func ReadHead(ctx context.Context, be Backend, key string, n int64) (ObjectInfo, []byte, error) {
	hr, ok := be.(HeadReader)
	if !ok {
		return ObjectInfo{}, nil, fmt.Errorf("read head of %s: %w", be, ErrNotSupported)
	}
	return hr.ReadHead(ctx, key, n)
}

// Checker is implemented by backends that can verify, before anything is
// mounted, that the bucket exists and the credentials work.
type Checker interface {
	Check(ctx context.Context) error
}

// Closer is implemented by backends holding resources (connections,
// clients) that should be released at unmount.
type Closer interface {
	Close() error
}

// VersionAbsent as PutOptions.IfVersion makes a put succeed only if the
// key does not exist yet.
const VersionAbsent = "\x00absent"

// PutOptions shape one upload.
type PutOptions struct {
	// IfVersion makes the put conditional: "" writes unconditionally,
	// VersionAbsent only creates, any other value replaces only that
	// version. A mismatch is ErrPreconditionFailed and changes nothing.
	IfVersion string
	// PartSize for multipart or composed uploads; 0 lets the backend
	// choose, growing with size so that the largest objects fit.
	PartSize int64
	// Concurrency is the number of parts in flight; 0 lets the backend choose.
	Concurrency int
	// Stop, once closed, gives the upload up (ErrStopped, nothing appears)
	// if the request that would make the object visible (a one-request
	// put, a multipart completion, a resumable upload's last chunk) has
	// not been sent. Once it has, Put waits for its answer (ctx still
	// bounds the wait), so that the result says whether the object
	// appeared: a request cancelled after it was sent can still take
	// effect, and its caller would not know to take it back. nil never
	// stops.
	Stop <-chan struct{}
}

// Writer is implemented by backends that accept uploads. An object
// appears only once its upload is complete: a failed or cancelled Put
// leaves no object and no partial version behind.
type Writer interface {
	// Put uploads size bytes read from r as key. r is an io.ReaderAt so
	// parts can be sent in parallel and retried.
	Put(ctx context.Context, key string, r io.ReaderAt, size int64, opt PutOptions) (ObjectInfo, error)
}

// PartWriter is implemented by Writers that can send an upload's parts
// while the file is still being written, so that the upload overlaps the
// writes (a checkpoint's close then waits for its last part only). A
// wrapper implements it always and returns ErrNotSupported from
// BeginParts when what it wraps does not.
type PartWriter interface {
	// BeginParts starts an upload of key sent in parts. Nothing appears
	// under key until Complete.
	BeginParts(ctx context.Context, key string) (PartUpload, error)
	// AbortParts gives up the upload of key that BeginParts began and
	// PartUpload.ID named (one a crash left open), removing its parts.
	// An upload that is no longer there is not an error.
	AbortParts(ctx context.Context, key, id string) error
}

// PartUpload is one upload sent in parts. Parts are numbered from 1 and
// may be sent in any order and concurrently; a part sent again replaces
// the earlier one. Every part but the last must be at least 5 MiB.
type PartUpload interface {
	// SendPart uploads n bytes of r at off as part number and returns its
	// tag, which Complete takes back.
	SendPart(ctx context.Context, number int, r io.ReaderAt, off, n int64) (string, error)
	// Complete makes the object of size bytes from the parts whose tags
	// are given, in order, under opt.IfVersion, stopped by opt.Stop as
	// Put is (given up only before the request is sent; no retry after
	// the stop). On error nothing appears under the key and the upload is
	// aborted.
	Complete(ctx context.Context, tags []string, size int64, opt CompleteOptions) (ObjectInfo, error)
	// Abort gives the upload up and removes its parts (best effort).
	Abort(ctx context.Context)
	// ID names the upload for PartWriter.AbortParts.
	ID() string
}

// CompleteOptions tunes PartUpload.Complete.
type CompleteOptions struct {
	// IfVersion: as PutOptions.IfVersion.
	IfVersion string
	// Stop: as PutOptions.Stop.
	Stop <-chan struct{}
}

// Deleter is implemented by backends that can remove objects.
type Deleter interface {
	// Delete removes key. A key that does not exist is not an error.
	Delete(ctx context.Context, key string) error
}

// Copier is implemented by backends with a server-side copy.
type Copier interface {
	// Copy makes dst a copy of src at srcVersion ("" for any) and returns
	// dst's new version; src missing or changed is ErrNotExist or
	// ErrVersionChanged. dst appears atomically.
	Copy(ctx context.Context, src, srcVersion, dst string) (ObjectInfo, error)
}

// OrDefault sets *v to def when it is not positive: how option structs
// fill the fields a caller left unset.
func OrDefault[T ~int | ~int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
