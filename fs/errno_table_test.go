package fs

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
)

// TestErrnoTableRows: every row of the table holds however deeply its
// error is wrapped, and inside an errors.Join.
func TestErrnoTableRows(t *testing.T) {
	for _, row := range errnoTable {
		for _, err := range []error{
			row.err,
			fmt.Errorf("s3: get k: %w", row.err),
			fmt.Errorf("fs: open k: %w", fmt.Errorf("prefetch: block 3: %w", row.err)),
			errors.Join(errors.New("cleanup failed too"), fmt.Errorf("op: %w", row.err)),
		} {
			if got := toErrno(err); got != row.errno {
				t.Errorf("toErrno(%v) = %v, want %v", err, got, row.errno)
			}
		}
	}
}

func TestErrnoTableCases(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("gcs: read k: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"not supported", wrap(backend.ErrNotSupported), syscall.ENOTSUP},
		{"deadline", wrap(context.DeadlineExceeded), syscall.ETIMEDOUT},
		{"no bucket is not a missing file", wrap(backend.ErrNoBucket), syscall.EIO},
		{"unavailable", wrap(backend.ErrUnavailable), syscall.EIO},
		// A backend whose retries are spent is EIO (README) whatever its
		// last attempt's error: GCS's "retry deadline reached" wraps the
		// deadline, and a listing or lookup of a silent endpoint came out
		// as ETIMEDOUT ("Connection timed out").
		{"unavailable after a deadline", wrap(fmt.Errorf("%w: retry deadline of 1m0s reached: %w", backend.ErrUnavailable, context.DeadlineExceeded)), syscall.EIO},
		{"unavailable after a cancel", wrap(fmt.Errorf("%w: %w", backend.ErrUnavailable, context.Canceled)), syscall.EIO},
		// The first row an error matches wins: the table's order is its meaning.
		{"first row wins", errors.Join(cache.ErrNoSpace, backend.ErrNotExist), syscall.ENOENT},
		{"table before pass-through", errors.Join(syscall.EPERM, backend.ErrAccessDenied), syscall.EACCES},
		{"local errno passes", wrap(syscall.ENOTEMPTY), syscall.ENOTEMPTY},
		{"network errno does not", wrap(syscall.ECONNRESET), syscall.EIO},
		{"host unreachable does not", wrap(syscall.EHOSTUNREACH), syscall.EIO},
		{"plain error", errors.New("disk on fire"), syscall.EIO},
	} {
		if got := toErrno(tc.err); got != tc.want {
			t.Errorf("%s: toErrno(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	for errno := range passThroughErrnos {
		if got := toErrno(fmt.Errorf("cache: write: %w", errno)); got != errno {
			t.Errorf("pass-through %v came out as %v", errno, got)
		}
	}
}

// TestErrnoThroughLookup: a backend error reaches the kernel as the
// table's errno, through a real lookup and readdir.
func TestErrnoThroughLookup(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want syscall.Errno
	}{
		{backend.ErrAccessDenied, syscall.EACCES},
		{backend.ErrUnavailable, syscall.EIO},
	} {
		f := newTestFS(t, map[string]string{"d/x": "X"})
		f.be.failWith(tc.err)
		if _, errno := f.lookup("d"); errno != tc.want {
			t.Errorf("lookup with the backend failing %v: errno %v, want %v", tc.err, errno, tc.want)
		}
		f.be.failWith(nil)
		// An unreachable backend opens the metadata breaker: lookups work
		// again once its background probe (one a second) finds it back.
		var errno syscall.Errno
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, errno = f.lookup("d/x"); errno == 0 || time.Now().After(deadline) {
				break
			}
		}
		if errno != 0 {
			t.Errorf("lookup 10 s after the backend recovered: %v", errno)
		}
	}
}
