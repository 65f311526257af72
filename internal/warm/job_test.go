package warm_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/faults"
	"github.com/stratafs/strata/internal/warm"
	"github.com/stratafs/strata/internal/warm/warmtest"
	"github.com/stratafs/strata/prefetch"
)

func TestWarmSelects(t *testing.T) {
	tests := []struct {
		name       string
		req        warm.Request
		want       []string
		wantFailed int64
	}{
		{name: "everything", want: []string{"d1/a.bin", "d1/d2/deep.bin", "empty", "top.txt", "train/a0.bin", "train/a1.bin", "train/b0.bin", "train/sub/a9.bin"}},
		{name: "a directory", req: warm.Request{Prefix: "train/"}, want: []string{"train/a0.bin", "train/a1.bin", "train/b0.bin", "train/sub/a9.bin"}},
		{name: "a key prefix", req: warm.Request{Prefix: "train/a"}, want: []string{"train/a0.bin", "train/a1.bin"}},
		{name: "a list", req: warm.Request{Paths: []string{"d1", "/train/b0.bin", "missing.bin"}}, want: []string{"d1/a.bin", "d1/d2/deep.bin", "train/b0.bin"}, wantFailed: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := warmtest.New(t, warmtest.Tree, 1<<30)
			var reports int
			p, err := e.Job(tc.req).Run(context.Background(), func(warm.Progress) { reports++ })
			if (err != nil) != (tc.wantFailed > 0) || p.Failed+p.FailedPaths != tc.wantFailed {
				t.Fatalf("run: failed %d, err %v; want %d failed", p.Failed, err, tc.wantFailed)
			}
			var bytes int64
			for _, k := range tc.want {
				bytes += e.Sizes[k]
			}
			if p.Objects != int64(len(tc.want)) || p.Bytes != bytes || p.DoneBytes != bytes || p.Listing || reports == 0 {
				t.Errorf("progress %+v (reports %d), want %d objects, %d bytes", p, reports, len(tc.want), bytes)
			}
			got := e.Cached(t)
			// Empty objects are complete whether warmed or not.
			var want []string
			for _, k := range append(tc.want, "empty") {
				if !strings.Contains(strings.Join(want, "\n"), k) {
					want = append(want, k)
				}
			}
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("cached %v, want %v", got, want)
			}
			if tc.wantFailed > 0 && !strings.Contains(err.Error(), "missing.bin") {
				t.Errorf("error does not name the missing path: %v", err)
			}
		})
	}
}

func TestWarmResumes(t *testing.T) {
	e := warmtest.New(t, warmtest.Tree, 1<<30)
	first, err := e.Job(warm.Request{Prefix: "train/"}).Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.Job(warm.Request{}).Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if all.Skipped != first.Bytes || all.Fetched() != all.Bytes-first.Bytes {
		t.Fatalf("second warm skipped %d (want %d), fetched %d (want %d)", all.Skipped, first.Bytes, all.Fetched(), all.Bytes-first.Bytes)
	}
	gets := func() (n int64) {
		for p := prefetch.Demand; p <= prefetch.Background; p++ {
			n += e.Fetch.Stats().Fetches[p].Load()
		}
		return n
	}
	before := gets()
	again, err := e.Job(warm.Request{}).Run(context.Background(), nil)
	if err != nil || again.Fetched() != 0 || again.Skipped != again.Bytes {
		t.Fatalf("third warm: %+v, %v", again, err)
	}
	if n := gets() - before; n != 0 {
		t.Fatalf("a warm of a warm cache made %d GETs", n)
	}
}

func TestWarmFailures(t *testing.T) {
	t.Run("an object that cannot be read", func(t *testing.T) {
		e := warmtest.New(t, warmtest.Tree, 1<<30)
		e.FB.SetHook(faults.OpRead, func(_ context.Context, c faults.Call) faults.Fault {
			if c.Key == "train/a1.bin" {
				return faults.Fault{Err: backend.ErrVersionChanged}
			}
			return faults.Fault{}
		})
		j := e.Job(warm.Request{})
		j.Stall = 200 * time.Millisecond
		p, err := j.Run(context.Background(), nil)
		if err == nil || p.Failed != 1 || !strings.Contains(err.Error(), "train/a1.bin") || !strings.Contains(err.Error(), "resume") {
			t.Fatalf("run: %+v, %v; want train/a1.bin failed", p, err)
		}
		if got := len(e.Cached(t)); got != len(warmtest.Tree)-1 {
			t.Fatalf("%d objects cached, want all but one", got)
		}
	})
	t.Run("the cache is too small", func(t *testing.T) {
		e := warmtest.New(t, map[string]int{"big.bin": 64 * warmtest.Block}, 8*warmtest.Block)
		j := e.Job(warm.Request{})
		j.Stall = 200 * time.Millisecond
		p, err := j.Run(context.Background(), nil)
		if !errors.Is(err, warm.ErrCacheFull) || p.Warning == "" {
			t.Fatalf("run: %+v, %v; want the cache-full error and a warning", p, err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		e := warmtest.New(t, warmtest.Tree, 1<<30)
		e.FB.Update(func(o *faults.Options) { o.Latency = 50 * time.Millisecond })
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := e.Job(warm.Request{}).Run(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "cancelled") || time.Since(start) > 5*time.Second {
			t.Fatalf("run after cancel: %v (took %s)", err, time.Since(start))
		}
	})
}

// TestWarmOfNothingSaysSo: a SOURCE or --prefix under which no object
// lies (a typo, or the name of one file: s3://bucket/dir/file.bin) is an
// error that says so, and names the file when it is one; before, warm
// reported "warmed 0 of 0 objects" and exited 0, and the training job
// then read everything cold.
func TestWarmOfNothingSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name, root string
		req        warm.Request
		want       []string
	}{
		{"a prefix of nothing", "", warm.Request{Prefix: "nope/"}, []string{"nothing to warm", `no object's key starts with "nope/"`}},
		{"a source of nothing", "nope/", warm.Request{}, []string{"nothing to warm", `no object's key starts with "nope/"`}},
		{"a source naming a file", "train/a0.bin/", warm.Request{}, []string{"nothing to warm", "train/a0.bin is an object (a file, not a directory)", "--from-list"}},
		{"a prefix naming a file", "train/", warm.Request{Prefix: "a0.bin/"}, []string{"train/a0.bin is an object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := warmtest.New(t, warmtest.Tree, 1<<30)
			j := e.Job(tc.req)
			j.Root = tc.root
			p, err := j.Run(context.Background(), nil)
			if !errors.Is(err, warm.ErrNothingToWarm) {
				t.Fatalf("run: %+v, %v; want ErrNothingToWarm", p, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
