// Package gcs is the Google Cloud Storage backend: one bucket, through
// cloud.google.com/go/storage (HTTP/JSON API, XML API for reads). It is the
// only package in Strata importing that library; everything GCS-specific
// (generations, credentials, retry policy, upload sessions, listing
// quirks) stays behind backend.Backend, Checker, Closer, Writer, Copier
// and Deleter.
//
// # Versions
//
// ObjectInfo.Version is the object's generation in decimal. ReadRange and
// Copy pin it with the generation= parameter, so one read never mixes two
// generations, including when the library re-requests the rest of a
// broken body. A pinned generation that is gone is ErrVersionChanged when
// the key has another live generation (replaced) and ErrNotExist when it
// has none (deleted). On a bucket with object versioning, a replaced
// generation stays readable, and reading it is still exactly the version
// asked for. An unpinned read is pinned to the generation of its first
// response.
//
// # Listing
//
// Delimiter "/" (none when Recursive); a page holds at most Limit entries
// (1000 by default). Tokens are the package's own (the last entry of the
// page, resumed with startOffset), not GCS page tokens, so paging obeys
// the contract whatever the server does with maxResults. A folder
// placeholder "dir/" is the prefix "dir/" of its parent and an object
// equal to the prefix when "dir/" is listed.
//
// # Failures
//
// 408, 429, 5xx and network errors are retried with exponential backoff
// and jitter, at most MaxAttempts times and RetryDeadline long; every
// operation is retried (RetryAlways), which is safe for each one this
// package issues (see New). Each attempt waits at most RequestTimeout for
// response headers; a read body that delivers nothing for StallTimeout is
// ErrUnavailable; an upload request that moves nothing for StallTimeout
// is cut, and an upload whose last two attempts went unanswered fails
// with ErrUnavailable (upload_stall.go); a body shorter than asked is
// io.ErrUnexpectedEOF. Errors
// are wrapped "gcs: op key: sentinel: cause": 404 object → ErrNotExist,
// 404 bucket → ErrNoBucket (List, Check, Put; a Stat or read cannot tell
// and says ErrNotExist), 401/403 and refused credentials →
// ErrAccessDenied, 412 → ErrPreconditionFailed, 400 (an invalid object
// name...) → ErrInvalidRequest, except a checksum mismatch (damaged in
// transit, worth another attempt), exhausted retries and network
// failures → ErrUnavailable. The caller's own cancellation is
// returned as the context error, not as a backend failure.
//
// # Writes
//
// Put sends objects below 16 MiB in one request and larger ones as a
// resumable session of chunks growing with the size (16 to 64 MiB, or
// PutOptions.PartSize), with the data's CRC32C checked by GCS at the end.
// The object appears only at finalization; a failed, short or cancelled
// Put aborts the session and leaves nothing. IfVersion maps to
// ifGenerationMatch (VersionAbsent: ifGenerationMatch=0), which GCS
// checks when the upload is finalized. A final request that failed
// without a verdict (timed out and re-sent, the re-send finding the
// session gone; or a 412 the upload's own first attempt may have
// caused; or a 5xx left standing because the upload was stopped, which
// a gateway gives for an answer it lost) is checked against the object:
// a generation other than the one replaced with the data's size and
// CRC32C is success. For a failure without any answer the object is
// polled for a while (confirmWindow) for a late first attempt.
//
// # Reads on emulators and custom endpoints
//
// GCS itself is read through the XML API. An emulator or a custom
// endpoint is read through the JSON API (alt=media, with Accept-Encoding
// gzip for stored bytes), and an unversioned read is pinned to the
// generation a Stat returns: emulators may not name the generation in
// download headers.
//
// # Credentials and endpoints
//
// Options.KeyFile, else Application Default Credentials (which cover
// GOOGLE_APPLICATION_CREDENTIALS and GKE workload identity), or none with
// Anonymous. Options.Endpoint or STORAGE_EMULATOR_HOST select another
// server; credentials are never sent to a plain-http endpoint.
//
// # fake-gcs-server (v1.56.1) compared with GCS
//
// Found by this package's tests; the backend is written for GCS:
//   - Its filesystem backend (the default of testserver.StartFakeGCS,
//     which survives restarts) stores "dir/" placeholders as directories,
//     invisible to Stat and List; cannot hold "x" and "x/y" together (a
//     500); has no object versioning. The in-memory backend behaves like
//     GCS on all three, and the conformance suite runs on it.
//   - maxResults counts only objects: every page carries all remaining
//     prefixes, which repeat on later pages out of order. GCS counts both
//     and pages in one order. The startOffset paging above makes both
//     give the same pages.
//   - Preconditions on downloads are ignored (this package reads by
//     generation=, which it honours); ifGenerationMatch on uploads is
//     honoured and checked at finalization, as on GCS.
//   - A resumable upload forgets its declared CRC32C after the first
//     chunk: multi-chunk uploads are not checksum-verified (GCS verifies
//     them). TestUploadChecksumEnforced checks one-request uploads only.
//   - XML API downloads are routed by Host: -public-host must be the
//     server's own host:port, or the Host header is taken for a bucket
//     (hence JSON reads on emulators, above).
//   - A final chunk re-sent to a session already finalized gets 404
//     (GCS returns the object): see Writes.
//     The test harness sets it.
//
// Copy with a source generation, ranged reads by generation, resumable
// uploads (invisible until the last chunk) and folder objects (memory
// backend) behave as on GCS.
//
// # Locks
//
// A Backend holds no mutable state. uploadRetry.mu guards one upload's
// retry budget and is a leaf, held for no I/O; the stall guard uses an
// atomic flag. No lock is held across network I/O.
package gcs
