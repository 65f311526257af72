package backend

import "context"

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
