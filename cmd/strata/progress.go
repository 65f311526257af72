package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/internal/config"
)

// progressState is what a progress display shows: objects and bytes done
// out of a total that may still grow (Listing).
type progressState struct {
	Objects, DoneObjects int64
	Bytes, DoneBytes     int64
	Listing              bool
	Failed               int64
}

// progressPrinter draws a one-line bar on a terminal (redrawn in place)
// and, elsewhere, prints a plain line every interval, so logs of a job
// running under a scheduler stay readable.
type progressPrinter struct {
	w        io.Writer
	tty      bool
	width    int
	label    string
	interval time.Duration // plain lines
	now      func() time.Time

	started time.Time
	last    time.Time // last plain line
	samples []rateSample
	drawn   bool
}

type rateSample struct {
	t     time.Time
	bytes int64
}

func newProgressPrinter(w io.Writer, label string, interval time.Duration) *progressPrinter {
	p := &progressPrinter{w: w, label: label, interval: interval, now: time.Now, width: 100}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		p.tty = true
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			p.width = int(ws.Col)
		}
	}
	p.started = p.now()
	p.last = p.started
	return p
}

// rate is bytes per second over the last few seconds (so the ETA follows
// the current speed, not the average since a slow start).
func (p *progressPrinter) rate(now time.Time, done int64) float64 {
	p.samples = append(p.samples, rateSample{now, done})
	for len(p.samples) > 2 && now.Sub(p.samples[0].t) > 5*time.Second {
		p.samples = p.samples[1:]
	}
	first := p.samples[0]
	dt := now.Sub(first.t).Seconds()
	if dt < 0.2 {
		if el := now.Sub(p.started).Seconds(); el > 0 {
			return float64(done) / el
		}
		return 0
	}
	return float64(done-first.bytes) / dt
}

// line renders one progress line without the bar.
func (p *progressPrinter) line(s progressState, rate float64) string {
	objs := fmt.Sprintf("%d/%d", s.DoneObjects, s.Objects)
	if s.Listing {
		objs += "+"
	}
	eta := "ETA -"
	switch {
	case s.Listing:
		eta = "listing…"
	case s.DoneBytes >= s.Bytes:
		eta = "ETA 0s"
	case rate > 0:
		eta = "ETA " + fmtDuration(time.Duration(float64(s.Bytes-s.DoneBytes)/rate*float64(time.Second)))
	}
	fail := ""
	if s.Failed > 0 {
		fail = fmt.Sprintf("  %d failed", s.Failed)
	}
	return fmt.Sprintf("%3d%%  %s objects  %s/%s  %s/s  %s%s", percent(s.DoneBytes, s.Bytes, s.Listing), objs,
		sizeStr(s.DoneBytes), sizeStr(s.Bytes), sizeStr(int64(rate)), eta, fail)
}

// update shows the state: redrawn on a terminal, a plain line per interval
// elsewhere.
func (p *progressPrinter) update(s progressState) {
	now := p.now()
	r := p.rate(now, s.DoneBytes)
	text := p.line(s, r)
	if !p.tty {
		if now.Sub(p.last) >= p.interval {
			p.last = now
			fmt.Fprintf(p.w, "%s: %s\n", p.label, text)
		}
		return
	}
	barWidth := p.width - len([]rune(text)) - len(p.label) - 6
	bar := ""
	if barWidth >= 10 {
		bar = " [" + drawBar(barWidth, s.DoneBytes, s.Bytes) + "] "
	} else {
		bar = " "
	}
	fmt.Fprintf(p.w, "\r\033[K%s%s%s", p.label, bar, text)
	p.drawn = true
}

// done ends the display (a terminal's bar line is kept).
func (p *progressPrinter) done() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}

func percent(done, total int64, listing bool) int {
	if total <= 0 {
		if listing {
			return 0
		}
		return 100
	}
	return int(min(100, done*100/total))
}

// drawBar renders done/total in width cells with eighth-cell precision.
func drawBar(width int, done, total int64) string {
	if total <= 0 {
		total, done = 1, 0
	}
	eighths := int(min(int64(width*8), done*int64(width*8)/total))
	full, part := eighths/8, eighths%8
	var b strings.Builder
	b.WriteString(strings.Repeat("█", full))
	if full < width {
		if part > 0 {
			b.WriteRune([]rune(" ▏▎▍▌▋▊▉")[part])
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(strings.Repeat(" ", width-full-1))
	}
	return b.String()
}

func sizeStr(n int64) string { return config.FormatBytes(n) }

// fmtDuration: 45s, 3m05s, 2h10m.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()+0.5))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
