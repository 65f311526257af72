package fs

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache"
)

func TestErrnoTable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("s3: get k: %w", err) }
	tests := []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{wrap(backend.ErrNotExist), syscall.ENOENT},
		{wrap(backend.ErrVersionChanged), syscall.ESTALE},
		{wrap(backend.ErrAccessDenied), syscall.EACCES},
		{wrap(backend.ErrPreconditionFailed), syscall.ESTALE},
		{wrap(backend.ErrUnavailable), syscall.EIO},
		{wrap(cache.ErrNoSpace), syscall.ENOSPC},
		{wrap(context.Canceled), syscall.EINTR},
		{wrap(syscall.EDQUOT), syscall.EDQUOT},
		{wrap(syscall.ECONNREFUSED), syscall.EIO}, // network errnos never leak to readers
		{errors.New("anything else"), syscall.EIO},
	}
	for _, tc := range tests {
		if got := toErrno(tc.err); got != tc.want {
			t.Errorf("toErrno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestInoStable(t *testing.T) {
	a, b := inoOf('f', "k", "v1"), inoOf('f', "k", "v2")
	if a == b || a != inoOf('f', "k", "v1") || a <= 1 || inoOf('d', "k", "") == inoOf('f', "k", "") {
		t.Fatal("inode numbers must be stable per (kind, key, version) and distinct otherwise")
	}
}
