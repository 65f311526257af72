// Package s3 serves an S3 bucket (AWS or any S3-compatible server) as a
// backend.Backend with aws-sdk-go-v2; it is the only package in Strata that
// imports the AWS SDK. It owns the client configuration (credential chain,
// endpoint, region, AWS_CA_BUNDLE, connection pool, retries and timeouts),
// the mapping of S3 answers to backend errors, ranged reads that never mix
// versions, multipart uploads and server-side copies.
//
// # Configuration
//
// New loads the standard configuration chain (environment, shared config
// and credentials files, profiles, SSO, web identity, ECS, IMDS) unless
// static keys or NoSignRequest are given. The HTTP client handed to
// config.LoadDefaultConfig is an awshttp.BuildableClient, the only kind on
// which the SDK can install AWS_CA_BUNDLE (a plain *http.Client makes
// LoadDefaultConfig fail when the variable is set); the resulting transport
// is then used by a client of our own so that Close can release its
// connections. HTTP/2 is disabled and the pool keeps MaxConns idle
// connections per host (256: about 128 concurrent GETs plus uploads).
// Checksums are computed and validated only when an operation requires them,
// and the SDK's "response has no supported checksum" log line is off.
//
// # Retries and timeouts
//
// The SDK standard retryer with MaxAttempts (10), exponential backoff with
// full jitter bounded by MaxBackoff (10 s), and no client-side retry quota.
// Every attempt is bounded by a middleware placed right after the retry
// loop: RequestTimeout for metadata requests, ResponseTimeout (by default
// RequestTimeout) for the response headers of a GET and for a HEAD or a
// one-key LIST (a lookup's requests), TransferTimeout for requests carrying data,
// which SendStallTimeout also cuts once nothing has moved for that long
// (stall.go: progressTransport reports every byte sent and received). An
// attempt that times out is retried; a metadata or data request's second
// timed-out attempt takes the endpoint for silent and fails it (a GET's
// and a lookup's short attempts go on: their callers bound them). Attempts exhausted on 5xx,
// throttling, network errors or timeouts give backend.ErrUnavailable. The
// caller's own cancellation is returned as the context error, never as
// ErrUnavailable. A multipart upload that fails with ErrUnavailable is
// aborted in the background (abortAfter).
//
// # Reads
//
// ReadRange sends Range and If-Match (the Version is the ETag without its
// quotes); 412 is backend.ErrVersionChanged. The answer's Content-Range and
// ETag are checked. While the caller waits in Read, a body that delivers no
// byte for ReadStallTimeout is cancelled; a broken or stalled body is
// resumed from the byte where it broke with a new GET pinned to the ETag,
// up to ReadResumes times, then fails with ErrUnavailable. A body that ends
// before the range does is an error, never a short read.
//
// # Listing
//
// List is ListObjectsV2 (delimiter "/" unless Recursive). Tokens are S3
// continuation tokens, or "start-after:<key>" when a full page came back
// marked final: MinIO (at the version pinned in the Makefile) drops the
// rest of a delimiter listing when a folder object equal to the prefix
// fills a page (prefix "dir/", max-keys 1: "dir/" comes back alone, not
// truncated, and "dir/x" is never listed), so a full "last" page is always
// followed by one more request; that costs one empty page when the server
// told the truth. MinIO also cannot hold a key and a prefix of the same name
// in a listing: with objects "k" and "k/child", "k/" is never listed.
//
// Listings (Check's included) ask for EncodingType url, since XML 1.0
// cannot carry a key holding a control character such as \x01 and one
// such key would make the whole page undecodable. Keys and common prefixes
// are then decoded with url.QueryUnescape (S3 and MinIO both send a space
// as '+' and a '+' as "%2B"), only when the answer says it is encoded: a
// server that ignores the parameter sends raw keys. StartAfter and Prefix
// go out raw.
//
// # Writes and conditional requests
//
// Put uses one PutObject up to MultipartThreshold (64 MiB; or up to
// PutOptions.PartSize when set), else a multipart upload with
// UploadConcurrency parts in flight; the part size (16 MiB by default, at
// least 5 MiB) grows so that any object fits in 10,000 parts (1 TiB: 105
// MiB parts). Any failure or cancellation aborts the multipart upload, so
// no part and no partial object remains. IfVersion is sent as
// If-None-Match: * (VersionAbsent) or If-Match: "etag" on PutObject and
// on CompleteMultipartUpload, where the object becomes visible; a
// multipart upload also checks the condition with a HEAD before uploading,
// to fail fast. If the answer to a CompleteMultipartUpload is lost and the
// retry finds NoSuchUpload, or a 412 (a conditional upload's own object),
// or every answer is lost, the object is accepted if its ETag is the one
// the parts produce and its size is right. A one-request PutObject is
// asked the same way (If-Match its bytes' MD5, the ETag S3 gives it
// outside SSE-KMS and SSE-C) when a retry of it found a 412, or when the
// upload's stop refused the retry of an attempt that was sent and went
// unanswered or got a 5xx (stopGate records that an attempt went out):
// the bucket may hold it, and the caller takes down what landed after a
// rename or delete. Copy pins the source with a HEAD and copies with
// x-amz-copy-source-if-match (CopyObject up to 5 GiB, UploadPartCopy above).
//
// What MinIO at the version the Makefile pins (the commit of 2026-02-12,
// module version v0.0.0-20260212201848-7aac2a2c5b7c) does with conditions,
// read from its
// source (cmd/object-handlers.go, cmd/object-multipart-handlers.go,
// cmd/erasure-object.go, cmd/erasure-multipart.go) and checked by the tests
// against the real server:
//   - PutObject and CompleteMultipartUpload honour If-Match and
//     If-None-Match ("*" or an ETag), evaluated under MinIO's per-object
//     namespace lock, so of concurrent create-only puts exactly one wins.
//     A failed condition is 412 PreconditionFailed.
//   - If-Match on a key that does not exist answers 404 NoSuchKey, not 412;
//     Put maps it to backend.ErrPreconditionFailed.
//   - AWS S3 may also answer 409 ConditionalRequestConflict when conditional
//     writes race; that too is ErrPreconditionFailed (the caller re-reads
//     the current version and decides). MinIO never sends it.
//   - NewMultipartUpload (CreateMultipartUpload) also evaluates them; AWS
//     does not, so this package does not send them there.
//   - GetObject and HeadObject with If-Match, and CopyObject and
//     UploadPartCopy with x-amz-copy-source-if-match, answer 412.
//
// # Errors
//
// Every error is "s3: op key: <sentinel>: <SDK error>", keeping both in the
// chain: NoSuchBucket is ErrNoBucket; NoSuchKey and 404 ErrNotExist;
// 403, AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch and expired
// tokens ErrAccessDenied; 412 ErrPreconditionFailed for writes and
// ErrVersionChanged for pinned reads and copies; exhausted 5xx, throttling,
// network errors and timeouts ErrUnavailable. The SDK error keeps the HTTP
// status, the S3 code and the request ID. Check says which credentials it
// used and what to fix.
//
// # Locks
//
// The package holds no locks of its own: the SDK client and the transport
// are safe for concurrent use, each reader is used by one goroutine, and a
// multipart upload's parts share nothing but a slice written at distinct
// indexes.
package s3
