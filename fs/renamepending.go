package fs

import (
	"context"
	"errors"
	"strings"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/cache/meta"
)

// A directory rename moves the files with local content that nodes of
// this mount hold (localUnder, moveFile) and the bucket's objects. After
// a restart, the uploads the new mount resumed from its journal belong
// to no node until their files are looked up: the rename moves them here,
// or they would go up under the old names (the renamed directory empty
// once they landed, the files back at the old path).

// pendingMove is one such upload moved to its new name.
type pendingMove struct {
	oldKey string
	// unsent: nothing of it can be under the old name (Rekey); otherwise
	// the old name's object, if any, goes once the rename is done.
	unsent bool
}

// nodelessPending returns the keys under prefix with an upload pending
// that none of locals holds.
func (f *FS) nodelessPending(prefix string, locals []*fileNode) []string {
	held := make(map[string]bool, len(locals))
	for _, n := range locals {
		held[n.key.get()] = true
	}
	var keys []string
	for _, k := range f.wb.PendingUnder(prefix) {
		if !held[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// movePending gives the uploads of keys their names under newPrefix, with
// their local entries, and returns those it moved. An upload that landed
// meanwhile is not moved (its object is in the bucket): its key is
// returned in landed, settled, for the caller to copy with the objects.
func (f *FS) movePending(ctx context.Context, keys []string, oldPrefix, newPrefix string) (moved []pendingMove, landed []string, err error) {
	for _, k := range keys {
		nk := newPrefix + strings.TrimPrefix(k, oldPrefix)
		r, err := f.wb.Rekey(k, nk, "")
		if err != nil {
			return moved, landed, err
		}
		if !r.Moved {
			if err := f.wb.WaitLanded(ctx, k); err != nil {
				return moved, landed, err
			}
			landed = append(landed, k)
			continue
		}
		od, on := meta.Parent(k)
		nd, nn := meta.Parent(nk)
		f.meta.MoveLocal(od, on, nd, nn)
		moved = append(moved, pendingMove{oldKey: k, unsent: r.Unsent})
	}
	return moved, landed, nil
}

// landedObjects returns the objects of the keys in landed that the
// listing objs has not (their uploads landed after it), as the bucket
// has them now.
func (f *FS) landedObjects(ctx context.Context, landed []string, objs []backend.ObjectInfo) ([]backend.ObjectInfo, error) {
	listed := make(map[string]bool, len(objs))
	for _, o := range objs {
		listed[o.Key] = true
	}
	var out []backend.ObjectInfo
	for _, k := range landed {
		if listed[k] {
			continue
		}
		info, err := f.be.Stat(ctx, k)
		if errors.Is(err, backend.ErrNotExist) {
			continue // deleted since by another client
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// finishPending takes the old names of the moved uploads out of the
// bucket (what an attempt before the restart, or an older version, left
// there) and out of the namespace.
func (f *FS) finishPending(ctx context.Context, moved []pendingMove) error {
	for _, mv := range moved {
		if !mv.unsent {
			if err := f.deleteObject(ctx, mv.oldKey); err != nil {
				return err
			}
		}
		od, on := meta.Parent(mv.oldKey)
		f.meta.Remove(od, on)
	}
	return nil
}
