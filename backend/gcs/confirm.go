package gcs

import (
	"context"
	"errors"
	"hash/crc32"
	"net/http"
	"strconv"
	"time"

	"cloud.google.com/go/storage"

	"github.com/stratafs/strata/backend"
)

// castagnoli is the CRC32C table; GCS stores every object's CRC32C.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxConfirmWait caps how long Put waits for an object whose final
// request went unanswered to appear (see confirmUpload).
const maxConfirmWait = 10 * time.Minute

// sent describes an upload whose every byte reached the library: what
// the object must look like if the upload landed.
type sent struct {
	size   int64
	crc    uint32
	prior  int64 // a generation the upload replaces (IfVersion), 0 if none known
	window time.Duration
}

// confirmUpload decides a failed Put whose final request was sent: the
// upload may have landed although the client saw an error. A final
// chunk whose response is late (GCS or an emulator assembling a large
// object) is timed out and re-sent; the re-send can find the session
// already finalized or gone (404/410 on fake-gcs-server, a 412 for a
// conditional upload that created the object), while the first request
// goes on to create the object. The object is asked: a live generation
// other than the one replaced, with the size and CRC32C of the data
// sent, is this upload (or identical bytes, which is what the writer
// meant). When the failure was ambiguous (no answer, or a session that
// is gone), the object is polled up to s.window for the late request to
// land; a definite answer is checked once. It returns false, and Put
// reports cause, when the object does not match, cannot be read, or
// does not appear in time.
func (b *Backend) confirmUpload(ctx context.Context, key string, s sent, cause error) (backend.ObjectInfo, bool) {
	wait := b.opt.InitialBackoff
	deadline := time.Now().Add(s.window)
	for {
		octx, cancel := b.opContext(ctx)
		attrs, err := b.bucket.Object(key).Attrs(octx)
		cancel()
		switch {
		case err == nil && attrs.Generation != s.prior && attrs.Size == s.size && attrs.CRC32C == s.crc:
			return info(attrs), true
		case err == nil && attrs.Generation != s.prior:
			return backend.ObjectInfo{}, false // another writer's object
		case err != nil && !errors.Is(err, storage.ErrObjectNotExist):
			return backend.ObjectInfo{}, false
		}
		if !ambiguous(ctx, cause) || time.Now().Add(wait).After(deadline) {
			return backend.ObjectInfo{}, false
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return backend.ObjectInfo{}, false
		case <-t.C:
		}
		wait = min(2*wait, b.opt.MaxBackoff)
	}
}

// ambiguous reports a final-request failure that says nothing about
// whether the upload was finalized, so that the object is polled for a
// while: no response (timeouts, broken connections, the chunk transfer
// timeout) or a session that no longer exists (404, 410: finalized by an
// earlier attempt, or expired). A 4xx answer to the last attempt is the
// server's verdict, and so is a 5xx once retries are spent. A 5xx that
// stands because the upload was stopped (no retry goes out after the
// stop) may be a gateway's for an answer it lost after the server stored
// the object: Put asks the object once then
// (TestStoppedUploadAnsweredByAGateway).
func ambiguous(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch httpCode(err) {
	case http.StatusNotFound, http.StatusGone:
		return true
	case 0:
		return errors.Is(err, context.DeadlineExceeded) || isNetwork(err)
	}
	return false
}

// confirmWindow is how long a final request that went unanswered may
// take to land: one retry stretch and one request, plus the time to
// move the object at the slowest throughput Put accepts (the server
// assembles it at finalization), capped by maxConfirmWait.
func (b *Backend) confirmWindow(size int64) time.Duration {
	return b.opt.RetryDeadline + b.opt.RequestTimeout +
		min(time.Duration(size/minThroughput)*time.Second, maxConfirmWait)
}

// priorGeneration is the generation a Put replaces when IfVersion names
// one, else 0 (nothing known: a matching object of any generation holds
// the bytes the writer meant).
func priorGeneration(ifVersion string) int64 {
	if ifVersion == "" || ifVersion == backend.VersionAbsent {
		return 0
	}
	g, err := strconv.ParseInt(ifVersion, 10, 64)
	if err != nil {
		return 0
	}
	return g
}
