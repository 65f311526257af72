package backend

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"testing"
)

// pagedLister serves n keys under "p/", two per page.
type pagedLister struct{ n, calls int }

func (l *pagedLister) String() string { return "paged://" }
func (l *pagedLister) Stat(context.Context, string) (ObjectInfo, error) {
	return ObjectInfo{}, ErrNotExist
}
func (l *pagedLister) ReadRange(context.Context, string, string, int64, int64) (io.ReadCloser, error) {
	return nil, ErrNotExist
}
func (l *pagedLister) List(_ context.Context, prefix string, opt ListOptions) (ListPage, error) {
	l.calls++
	start, _ := strconv.Atoi(opt.Token)
	var page ListPage
	for i := start; i < min(start+2, l.n); i++ {
		page.Objects = append(page.Objects, ObjectInfo{Key: fmt.Sprintf("%s%03d", prefix, i)})
	}
	if start+2 < l.n {
		page.Next = strconv.Itoa(start + 2)
	}
	return page, nil
}

// ListAll follows every page, and stops once past its bound.
func TestListAll(t *testing.T) {
	l := &pagedLister{n: 7}
	objs, complete, err := ListAll(context.Background(), l, "p/", 0)
	if err != nil || !complete || len(objs) != 7 || objs[6].Key != "p/006" || l.calls != 4 {
		t.Fatalf("unbounded: %d objects, complete %v, %d calls, %v", len(objs), complete, l.calls, err)
	}
	l.calls = 0
	if objs, complete, err := ListAll(context.Background(), l, "p/", 3); err != nil || complete || len(objs) != 4 || l.calls != 2 {
		t.Fatalf("bound 3: %d objects, complete %v, %d calls, %v", len(objs), complete, l.calls, err)
	}
	if _, complete, _ := ListAll(context.Background(), l, "p/", 7); !complete {
		t.Fatal("bound 7 of 7 objects: reported incomplete")
	}
}

func TestUnlistedMarker(t *testing.T) {
	o := func(keys ...string) []ObjectInfo {
		var out []ObjectInfo
		for _, k := range keys {
			out = append(out, ObjectInfo{Key: k})
		}
		return out
	}
	for _, c := range []struct {
		objs []ObjectInfo
		want bool
	}{
		{o("a/f", "a/x/g"), false},          // no markers (GCS without them, or files only): no extra request
		{o("a/", "a/empty/", "a/f"), false}, // the prefix's own is listed: the loop deletes it
		{o("a/empty/", "a/full/f"), true},   // a directory tree lists only empty directories
		{o("a/x/y/"), true},                 // only an emptied subtree
		{nil, false},
	} {
		if got := UnlistedMarker(c.objs, "a/"); got != c.want {
			t.Errorf("UnlistedMarker(%v) = %v, want %v", c.objs, got, c.want)
		}
	}
}
