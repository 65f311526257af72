package s3

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
)

// TestMinIOStartAfterOddKeys resumes a listing after each key holding a
// character the URL encoding changes: StartAfter goes out raw (the SDK
// escapes the query) while the answer comes back encoded, so a mistake on
// either side skips or repeats keys. The conformance suite's ControlKeys
// covers continuation tokens; this covers our own start-after tokens, and
// Check, which lists the bucket's first key.
func TestMinIOStartAfterOddKeys(t *testing.T) {
	m := startMinIO(t)
	b := newMinIOBackend(t, m, minioOptions(m))
	ctx := context.Background()
	keys := []string{
		"odd/\x01ctl", "odd/\x02dir/child", "odd/new\nline", "odd/pct%2Fdir/child",
		"odd/percent%41", "odd/plus+space x", "odd/sp ace/child", "odd/tab\there",
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := b.Put(ctx, k, strings.NewReader(k), int64(len(k)), backend.PutOptions{}); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	if err := b.Check(ctx); err != nil { // lists the first key, "odd/\x01ctl"
		t.Fatalf("Check of a bucket whose first key is odd/\x01ctl: %v", err)
	}
	for i, k := range keys {
		page, err := b.List(ctx, "odd/", backend.ListOptions{Recursive: true, Token: startAfterToken + k})
		if err != nil {
			t.Fatalf("List after %q: %v", k, err)
		}
		var got []string
		for _, o := range page.Objects {
			got = append(got, o.Key)
		}
		if want := keys[i+1:]; !slices.Equal(got, want) {
			t.Errorf("List after %q = %q, want %q", k, got, want)
		}
	}
	// With the delimiter, a prefix holding the start-after key is left out.
	page, err := b.List(ctx, "odd/", backend.ListOptions{Token: startAfterToken + "odd/\x02dir/child"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"odd/pct%2Fdir/", "odd/sp ace/"}; !slices.Equal(page.Prefixes, want) {
		t.Errorf("prefixes after odd/\\x02dir/child = %q, want %q", page.Prefixes, want)
	}
}

// TestListDecodesOnlyWhenEncoded: a key is URL-decoded only when the
// answer says EncodingType url; a server that ignores the parameter sends
// raw keys, which must be taken as they are.
func TestListDecodesOnlyWhenEncoded(t *testing.T) {
	for _, tc := range []struct {
		encoding, sent, want string
	}{
		{"url", "a/pct%2541+b%2Bc%01", "a/pct%41 b+c\x01"},
		{"", "a/pct%41+b", "a/pct%41+b"},
	} {
		var query string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			query = r.URL.RawQuery
			enc := ""
			if tc.encoding != "" {
				enc = "<EncodingType>" + tc.encoding + "</EncodingType>"
			}
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name>%s
<KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>
<Contents><Key>%s</Key><Size>1</Size><ETag>"e"</ETag></Contents>
<CommonPrefixes><Prefix>%s/</Prefix></CommonPrefixes></ListBucketResult>`, enc, tc.sent, tc.sent)
		}))
		b := backendAt(t, srv.URL)
		page, err := b.List(context.Background(), "", backend.ListOptions{})
		srv.Close()
		if err != nil {
			t.Fatalf("encoding %q: %v", tc.encoding, err)
		}
		if !strings.Contains(query, "encoding-type=url") {
			t.Errorf("request query %q: want encoding-type=url", query)
		}
		if len(page.Objects) != 1 || page.Objects[0].Key != tc.want {
			t.Errorf("encoding %q: objects %+v, want key %q", tc.encoding, page.Objects, tc.want)
		}
		if want := []string{tc.want + "/"}; !slices.Equal(page.Prefixes, want) {
			t.Errorf("encoding %q: prefixes %q, want %q", tc.encoding, page.Prefixes, want)
		}
	}
}
