package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// readDir lists dir through the cache, returning its names or the error
// the reader met.
func readDir(c *Cache, dir string) ([]string, error) {
	r := c.OpenDir(context.Background(), dir)
	var out []string
	for {
		e, ok, err := r.Next(context.Background())
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		s := e.Name
		if e.Dir {
			s += "/"
		}
		out = append(out, s)
	}
}

// bigDir is a directory of 50 entries over five pages of ten, with a name
// that is both a file and a prefix ("f19" and "f19/x") across a page
// boundary, so that a resumed listing must carry the merger's state.
func bigDir() (*fakeBackend, []string) {
	var keys, want []string
	for i := range 49 {
		keys = append(keys, fmt.Sprintf("d/f%02d", i))
		if i == 19 {
			keys = append(keys, "d/f19/x")
			want = append(want, "f19/")
			continue
		}
		want = append(want, fmt.Sprintf("f%02d", i))
	}
	return newFake(10, keys...), want
}

// callsUnder counts the delimited listings asked for under prefix.
func (f *fakeBackend) callsUnder(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// tokens returns the continuation tokens the cache asked for in dir's
// delimited listings, in order.
func (f *fakeBackend) tokens(dir string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if tok, ok := strings.CutPrefix(c, dir+"@"); ok {
			out = append(out, tok)
		}
	}
	return out
}

// A listing cut short by an error (the backend's own retries spent on one
// page) resumes from the page that failed when the directory is read
// again, instead of listing its first pages again: after an error the
// backend answers again at once, and after an outage that opened the
// breaker, once the breaker lets calls through again.
func TestFailedListingResumesFromItsPage(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"error", errors.New("SlowDown")},
		{"outage", nil}, // backend.ErrUnavailable: the breaker opens
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, want := bigDir()
			be.failAt.Store(3) // the third page
			be.failErr = tc.err
			clk := &testClock{}
			c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
			if got, err := readDir(c, "d/"); err == nil {
				t.Fatalf("the first readdir saw no error (%d entries)", len(got))
			}
			failed := be.tokens("d/")[2]

			// After an outage readdir fails fast until the breaker's
			// probe (a second on its clock) finds the backend again.
			var got []string
			var err error
			for range 100 {
				if got, err = readDir(c, "d/"); err == nil {
					break
				}
				clk.ns.Add(int64(2 * time.Second))
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("the directory could not be read again: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("resumed listing:\n got %v\nwant %v", got, want)
			}
			tokens := be.tokens("d/")
			if len(tokens) < 4 || tokens[3] != failed {
				t.Fatalf("the second load asked for %q after the failed page %q: it restarted (tokens %q)", tokens[3:], failed, tokens)
			}
			if slices.Contains(tokens[1:], "") {
				t.Fatalf("the first page was listed again (tokens %q)", tokens)
			}
			// The completed listing answers lookups, negative ones too,
			// with no request.
			// (Counted: what a lookup would send, a Stat or a delimited
			// listing under d/. The breaker's probe, a listing of the
			// root, and the flat prefetch of d/f19/ may still be running
			// in the background.)
			asked := func() int64 { return be.stats.Load() + int64(be.callsUnder("d/")) }
			before := asked()
			if _, err := c.Lookup(context.Background(), "d/", "f48"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Lookup(context.Background(), "d/", "nope"); err == nil {
				t.Fatal("a name not in the listing was found")
			}
			if n := asked() - before; n != 0 {
				t.Fatalf("%d requests after the listing completed", n)
			}
		})
	}
}

// What was read before the failure is not kept past the metadata TTL, nor
// across a local edit of the directory: the next load starts again.
func TestFailedListingRestartsWhenStale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(c *Cache, clk *testClock)
	}{
		{"ttl", func(_ *Cache, clk *testClock) { clk.ns.Add(int64(2 * time.Minute)) }},
		{"edit", nil}, // the mount wrote d/new
		{"invalidate", func(c *Cache, clk *testClock) { clk.ns.Add(1); c.Invalidate("d/") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be, want := bigDir()
			be.failAt.Store(3)
			be.failErr = errors.New("SlowDown")
			clk := &testClock{}
			c := newCache(t, be, openIndex(t, t.TempDir()), time.Minute, clk)
			if _, err := readDir(c, "d/"); err == nil {
				t.Fatal("the first readdir saw no error")
			}
			if tc.after != nil {
				tc.after(c, clk)
			} else {
				clk.ns.Add(1)
				be.put("d/new", 1, "v1")
				c.Upsert("d/", Entry{Name: "new", Size: 1, Version: "v1"})
				want = append(slices.Clone(want), "new")
			}
			requireRestarted(t, c, be, want)
		})
	}
}

// The entries kept for resumes count against Options.MaxEntries: a failed
// load that would go past it keeps nothing, and the next one starts over.
func TestFailedListingKeptWithinMaxEntries(t *testing.T) {
	be, want := bigDir()
	be.failAt.Store(3)
	be.failErr = errors.New("SlowDown")
	o := DefaultOptions()
	o.MaxEntries = 15 // the failed load published 20
	clk := &testClock{}
	clk.ns.Store(int64(1e18))
	o.Clock = clk.now
	c := New(be, openIndex(t, t.TempDir()), o)
	t.Cleanup(c.Close)
	if _, err := readDir(c, "d/"); err == nil {
		t.Fatal("the first readdir saw no error")
	}
	c.mu.Lock()
	held := c.resumeHeld
	c.mu.Unlock()
	if held != 0 {
		t.Fatalf("%d entries kept for a resume, past MaxEntries %d", held, o.MaxEntries)
	}
	requireRestarted(t, c, be, want)
}

// requireRestarted reads d/ again and fails unless it holds want and its
// load started over from the first page.
func requireRestarted(t *testing.T, c *Cache, be *fakeBackend, want []string) {
	t.Helper()
	got, err := readDir(c, "d/")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if tokens := be.tokens("d/"); len(tokens) < 4 || tokens[3] != "" {
		t.Fatalf("the second load resumed instead of starting over (tokens %q)", tokens)
	}
}
