package gcs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/stratafs/strata/backend"
)

// defaultPageSize is the listing page size when ListOptions.Limit is 0,
// also the most GCS returns in one response.
const defaultPageSize = 1000

// listFields are the object fields a listing asks for: nothing else is
// used, and a smaller response lists faster.
var listFields = []string{"Name", "Size", "Updated", "Generation"}

// List returns one page of the names under prefix, with delimiter "/"
// unless opt.Recursive.
//
// Paging does not hand out GCS page tokens: a token names the last entry
// returned, and the next page asks for names from there on (startOffset).
// The contract then holds whatever the server does with maxResults:
// exactly up to Limit entries (objects plus prefixes) per page, each
// slice sorted in byte order, and every entry of a page before every
// entry of the next. (fake-gcs-server counts only objects against
// maxResults and returns all remaining prefixes on every page; real GCS
// counts both, and may return fewer than asked.)
//
// A folder placeholder object "dir/" shows up as the prefix "dir/" when
// listing its parent, and as an object equal to the prefix when listing
// "dir/" itself, as GCS returns it.
func (b *Backend) List(ctx context.Context, prefix string, opt backend.ListOptions) (backend.ListPage, error) {
	after, err := decodeToken(opt.Token)
	if err != nil {
		return backend.ListPage{}, fmt.Errorf("gcs: list %s: %w", prefix, err)
	}
	q := &storage.Query{Prefix: prefix, StartOffset: after.startOffset()}
	if !opt.Recursive {
		q.Delimiter = "/"
	}
	if err := q.SetAttrSelection(listFields); err != nil {
		return backend.ListPage{}, fmt.Errorf("gcs: list %s: %w", prefix, err)
	}
	limit := opt.Limit
	if limit <= 0 {
		limit = defaultPageSize
	}
	octx, cancel := b.opContext(ctx)
	defer cancel()
	var items []*storage.ObjectAttrs
	// One more than the page: the name a startOffset resumes from comes
	// back first and is dropped.
	more, err := iterator.NewPager(b.bucket.Objects(octx, q), limit+1, "").NextPage(&items)
	if err != nil {
		return backend.ListPage{}, wrap(ctx, "list", prefix, b.opErr(ctx, octx, listErr(err)))
	}

	entries := make([]listEntry, 0, len(items))
	for _, it := range items {
		e := listEntry{name: it.Name, attrs: it}
		if it.Prefix != "" {
			e = listEntry{name: it.Prefix, prefix: true}
		}
		if after.name != "" && e.name <= after.name {
			continue
		}
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].name != entries[j].name {
			return entries[i].name < entries[j].name
		}
		return entries[i].prefix && !entries[j].prefix
	})
	entries = dedupe(entries)

	var page backend.ListPage
	if len(entries) > limit || (more != "" && len(entries) > 0) {
		if len(entries) > limit {
			entries = entries[:limit]
		}
		last := entries[len(entries)-1]
		page.Next = encodeToken(listToken{name: last.name, prefix: last.prefix})
	}
	for _, e := range entries {
		if e.prefix {
			page.Prefixes = append(page.Prefixes, e.name)
		} else {
			page.Objects = append(page.Objects, info(e.attrs))
		}
	}
	return page, nil
}

type listEntry struct {
	name   string
	prefix bool
	attrs  *storage.ObjectAttrs
}

// dedupe drops repeated entries of a sorted slice (a server may repeat
// a prefix).
func dedupe(es []listEntry) []listEntry {
	out := es[:0]
	for i, e := range es {
		if i > 0 && e.name == es[i-1].name && e.prefix == es[i-1].prefix {
			continue
		}
		out = append(out, e)
	}
	return out
}

// listToken is the last entry of a page.
type listToken struct {
	name   string
	prefix bool
}

// startOffset is where the next request starts. After a prefix "d/", it
// is "d0": the first name that sorts after everything under "d/" ('0' is
// the byte after '/'), so the prefix does not come back.
func (t listToken) startOffset() string {
	if t.prefix && strings.HasSuffix(t.name, "/") {
		return t.name[:len(t.name)-1] + "0"
	}
	return t.name
}

const (
	tokenObject = "o:"
	tokenPrefix = "p:"
)

func encodeToken(t listToken) string {
	kind := tokenObject
	if t.prefix {
		kind = tokenPrefix
	}
	return base64.RawURLEncoding.EncodeToString([]byte(kind + t.name))
}

var errBadToken = errors.New("invalid list token")

func decodeToken(s string) (listToken, error) {
	if s == "" {
		return listToken{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listToken{}, fmt.Errorf("%w %q", errBadToken, s)
	}
	switch v := string(raw); {
	case strings.HasPrefix(v, tokenObject) && len(v) > len(tokenObject):
		return listToken{name: v[len(tokenObject):]}, nil
	case strings.HasPrefix(v, tokenPrefix) && len(v) > len(tokenPrefix):
		return listToken{name: v[len(tokenPrefix):], prefix: true}, nil
	}
	return listToken{}, fmt.Errorf("%w %q", errBadToken, s)
}

// listErr: a 404 on a listing can only be the bucket.
func listErr(err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) || httpCode(err) == 404 {
		return fmt.Errorf("%w: %w", backend.ErrNoBucket, err)
	}
	return err
}
