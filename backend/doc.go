// Package backend defines what Strata needs from a source of objects (an S3
// or GCS bucket, or a slow local directory) and the errors every source
// reports in the same way. Implementations live in sub-packages: s3, gcs,
// local; faults wraps any of them to inject latency and failures; and
// backendtest is the conformance suite every implementation passes.
//
// Reads (Backend) are mandatory; writes, copies and deletes are small
// optional interfaces (Writer, Copier, Deleter) that callers assert.
// Compose lets a wrapper offer exactly the optional interfaces of what it
// wraps.
//
// The package holds no state and no locks.
package backend
