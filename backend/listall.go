package backend

import (
	"context"
	"strings"
)

// ListAll lists every object under prefix, all pages, without delimiter.
// With max > 0 it stops once it has more than max objects and reports
// complete false (a caller with a bound decides what "too many" means).
func ListAll(ctx context.Context, be Backend, prefix string, max int) (objs []ObjectInfo, complete bool, err error) {
	for token := ""; ; {
		page, err := be.List(ctx, prefix, ListOptions{Token: token, Recursive: true})
		if err != nil {
			return objs, false, err
		}
		objs = append(objs, page.Objects...)
		if max > 0 && len(objs) > max {
			return objs, false, nil
		}
		if token = page.Next; token == "" {
			return objs, true, nil
		}
	}
}

// UnlistedMarker reports whether a move of everything under prefix, whose
// recursive listing is objs, must also delete prefix's own marker: the
// listing shows directory markers under prefix but not prefix's. A
// directory tree (file://) lists a directory as a marker only while it is
// empty, and deleting prefix's removes the directories the move emptied;
// an object store that keeps no markers shows none, and costs no request.
func UnlistedMarker(objs []ObjectInfo, prefix string) bool {
	markers, own := false, false
	for _, o := range objs {
		if strings.HasSuffix(o.Key, "/") {
			markers = true
			own = own || o.Key == prefix
		}
	}
	return markers && !own
}
