package main

import (
	"strings"
	"testing"
)

func TestFillIsAFunctionOfOffset(t *testing.T) {
	whole := make([]byte, 1000)
	fill(whole, 7, 0)
	for _, r := range [][2]int{{0, 1}, {3, 17}, {8, 8}, {13, 500}, {999, 1}} {
		part := make([]byte, r[1])
		fill(part, 7, int64(r[0]))
		if string(part) != string(whole[r[0]:r[0]+r[1]]) {
			t.Fatalf("fill at %d+%d differs from the whole", r[0], r[1])
		}
	}
	other := make([]byte, 1000)
	fill(other, 8, 0)
	if string(other) == string(whole) {
		t.Fatal("two files have the same bytes")
	}
}

// TestEvaluate: the soak's verdict can fail on each criterion.
func TestEvaluate(t *testing.T) {
	c := config{memoryLimit: 128 << 20, rssAllowance: 384 << 20}
	idle := func(rss int64, fds, thr, g int) []sample {
		return []sample{{Label: "before", At: 0, RSSAnon: 100 << 20, FDs: 20, Threads: 10, Goroutines: 40},
			{Label: "after phase 1", At: 10, RSSAnon: 200 << 20, FDs: 40, CacheFDs: 10, Threads: 20, Goroutines: 60},
			{Label: "after phase 2", At: 20, RSSAnon: 200 << 20, FDs: 40, CacheFDs: 10, Threads: 20, Goroutines: 60},
			{Label: "after phase 3", At: 30, RSSAnon: rss, FDs: fds + 500, CacheFDs: 510, Threads: thr, Goroutines: g}}
	}
	load := func(r1, r3 int64) []sample {
		return []sample{{At: 5, RSSAnon: r1}, {At: 15, RSSAnon: r1}, {At: 25, RSSAnon: r3}}
	}
	ok := phaseStats{Reads: 10}
	tests := []struct {
		name   string
		phases []phaseStats
		idle   []sample
		load   []sample
		want   string
	}{
		{"clean", []phaseStats{ok, ok, ok}, idle(200<<20, 44, 22, 70), load(300<<20, 310<<20), ""},
		{"wrong bytes", []phaseStats{ok, {Reads: 5, WrongBytes: 1}, ok}, idle(200<<20, 40, 20, 60), load(300<<20, 300<<20), "wrong bytes"},
		{"read errors", []phaseStats{ok, ok, {Reads: 5, Errors: 2, FirstError: "EIO"}}, idle(200<<20, 40, 20, 60), load(300<<20, 300<<20), "failed"},
		{"anonymous rss past limit", []phaseStats{ok, ok, ok}, idle(200<<20, 40, 20, 60), load(300<<20, 600<<20), "peak anonymous RSS"},
		{"rss growing", []phaseStats{ok, ok, ok}, idle(200<<20, 40, 20, 60), load(200<<20, 400<<20), "RSS grew"},
		{"fd leak", []phaseStats{ok, ok, ok}, idle(200<<20, 100, 20, 60), load(300<<20, 300<<20), "descriptors"},
		{"goroutine leak", []phaseStats{ok, ok, ok}, idle(200<<20, 40, 20, 500), load(300<<20, 300<<20), "goroutines"},
		{"threads unbounded", []phaseStats{ok, ok, ok}, idle(200<<20, 40, 300, 60), load(300<<20, 300<<20), "threads"},
		{"read hung", []phaseStats{ok, {Reads: 5, SlowestMS: 200e3}, ok}, idle(200<<20, 40, 20, 60), load(300<<20, 300<<20), "a read took"},
	}
	for _, tc := range tests {
		r := &report{Phases: tc.phases, Idle: tc.idle, Samples: tc.load}
		r.evaluate(c)
		got := strings.Join(r.Failures, "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: failures %q, want one about %q", tc.name, got, tc.want)
		}
	}
}
