package writeback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/stratafs/strata/backend"
)

// A conditional upload can fail because of itself: an earlier attempt
// landed but its answer was lost (the process was killed with the request
// in flight, or the client retried a request that had in fact succeeded),
// and the retry, still conditional on the old state, now finds the bucket
// changed. Before calling a precondition failure a conflict, the manager
// compares the bucket's object with the staged file; the same bytes mean
// the upload is done. Reading the object back is the price of this rare
// path; a different object is a real conflict, reported as before.

// landedEarlier reports whether key already holds exactly the staged file
// at path (size r.Size), and the attributes of the object key holds, if
// any (a take-down tells another writer's object by them).
func (m *Manager) landedEarlier(ctx context.Context, key, path string, size int64) (backend.ObjectInfo, bool, error) {
	if m.stat == nil {
		return backend.ObjectInfo{}, false, nil
	}
	info, err := m.stat.Stat(ctx, key)
	if errors.Is(err, backend.ErrNotExist) {
		return backend.ObjectInfo{}, false, nil
	}
	if err != nil {
		return backend.ObjectInfo{}, false, err
	}
	if info.Size != size {
		return info, false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return backend.ObjectInfo{}, false, fmt.Errorf("writeback: comparing with the bucket: %w", err)
	}
	defer f.Close()
	if size == 0 {
		return info, true, nil
	}
	rc, err := m.stat.ReadRange(ctx, key, info.Version, 0, size)
	if err != nil {
		return backend.ObjectInfo{}, false, err
	}
	defer rc.Close()
	same, err := sameBytes(f, rc)
	if err != nil {
		return backend.ObjectInfo{}, false, err
	}
	return info, same, nil
}

// sameBytes compares two streams to their ends.
func sameBytes(a, b io.Reader) (bool, error) {
	const chunk = 1 << 20
	ba, bb := make([]byte, chunk), make([]byte, chunk)
	for {
		na, erra := io.ReadFull(a, ba)
		nb, errb := io.ReadFull(b, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		endA := erra == io.EOF || errors.Is(erra, io.ErrUnexpectedEOF)
		endB := errb == io.EOF || errors.Is(errb, io.ErrUnexpectedEOF)
		switch {
		case erra != nil && !endA:
			return false, erra
		case errb != nil && !endB:
			return false, errb
		case endA || endB:
			return endA && endB, nil
		}
	}
}
