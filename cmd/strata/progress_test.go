package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestDrawBar(t *testing.T) {
	tests := []struct {
		width       int
		done, total int64
		want        string
	}{
		{10, 0, 100, "          "},
		{10, 100, 100, "██████████"},
		{10, 50, 100, "█████     "},
		{10, 55, 100, "█████▌    "},
		{4, 7, 0, "    "},
		{4, 200, 100, "████"},
	}
	for _, tc := range tests {
		if got := drawBar(tc.width, tc.done, tc.total); got != tc.want || len([]rune(got)) != tc.width {
			t.Errorf("drawBar(%d, %d, %d) = %q, want %q", tc.width, tc.done, tc.total, got, tc.want)
		}
	}
}

func TestFmtDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		4 * time.Second: "4s", 185 * time.Second: "3m05s", 2*time.Hour + 10*time.Minute: "2h10m", 0: "0s",
	} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// Off a terminal, one plain line per interval with objects, bytes, rate
// and ETA; nothing in between.
func TestPlainProgressLines(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	p := newProgressPrinter(&out, "warm", 10*time.Second)
	p.now = func() time.Time { return now }
	p.started, p.last = now, now
	step := func(d time.Duration, s progressState) {
		now = now.Add(d)
		p.update(s)
	}
	step(time.Second, progressState{Objects: 10, Bytes: 100 << 20, DoneBytes: 10 << 20, DoneObjects: 1, Listing: true})
	if out.Len() != 0 {
		t.Fatalf("printed before the interval: %q", out.String())
	}
	step(9*time.Second, progressState{Objects: 10, Bytes: 100 << 20, DoneBytes: 50 << 20, DoneObjects: 5})
	step(time.Second, progressState{Objects: 10, Bytes: 100 << 20, DoneBytes: 55 << 20, DoneObjects: 5})
	step(10*time.Second, progressState{Objects: 10, Bytes: 100 << 20, DoneBytes: 100 << 20, DoneObjects: 10})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out.String())
	}
	for _, want := range []string{"warm:  50%", "5/10 objects", "50MiB/100MiB", "MiB/s", "ETA "} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], "100%") || !strings.Contains(lines[1], "ETA 0s") {
		t.Errorf("last line %q", lines[1])
	}
	if strings.Contains(out.String(), "\r") || strings.Contains(out.String(), "\033") {
		t.Error("terminal control characters off a terminal")
	}
}
