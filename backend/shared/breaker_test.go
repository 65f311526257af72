package shared

import (
	"errors"
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	errDown := errors.New("down")
	type step struct {
		op      string // "ok", "fail", "wait <dur>" (advance the clock), "allow", "deny", "probe", "abandon"
		probe   bool   // the outcome reported is the probe's
		wait    time.Duration
		changes int // opens+closes seen so far
		closed  bool
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"failures below threshold keep it closed", []step{
			{op: "fail", closed: true}, {op: "fail", closed: true}, {op: "ok", closed: true},
			{op: "fail", closed: true}, {op: "fail", closed: true}, {op: "allow", closed: true},
		}},
		{"threshold opens, cooldown denies, probe closes", []step{
			{op: "fail", closed: true}, {op: "fail", closed: true}, {op: "fail", changes: 1},
			{op: "deny", changes: 1}, {op: "wait", wait: 9 * time.Second, changes: 1}, {op: "deny", changes: 1},
			{op: "wait", wait: time.Second, changes: 1}, {op: "probe", changes: 1}, {op: "deny", changes: 1},
			{op: "ok", probe: true, changes: 2, closed: true}, {op: "allow", changes: 2, closed: true},
		}},
		{"failed probe doubles the cooldown up to the max", []step{
			{op: "fail", closed: true}, {op: "fail", closed: true}, {op: "fail", changes: 1},
			{op: "wait", wait: 10 * time.Second, changes: 1}, {op: "probe", changes: 1},
			{op: "fail", probe: true, changes: 1},
			{op: "wait", wait: 19 * time.Second, changes: 1}, {op: "deny", changes: 1},
			{op: "wait", wait: time.Second, changes: 1}, {op: "probe", changes: 1},
			{op: "fail", probe: true, changes: 1},
			{op: "wait", wait: 25 * time.Second, changes: 1}, {op: "probe", changes: 1}, // 40s capped at 25s
			{op: "ok", probe: true, changes: 2, closed: true},
		}},
		{"abandoned probe lets the next read probe", []step{
			{op: "fail", closed: true}, {op: "fail", closed: true}, {op: "fail", changes: 1},
			{op: "wait", wait: 10 * time.Second, changes: 1}, {op: "probe", changes: 1}, {op: "deny", changes: 1},
			{op: "abandon", changes: 1}, {op: "probe", changes: 1},
		}},
		{"outcomes of reads begun before opening do not close it", []step{
			{op: "fail", closed: true}, {op: "fail", closed: true}, {op: "fail", changes: 1},
			{op: "ok", changes: 1}, {op: "fail", changes: 1}, {op: "deny", changes: 1},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			changes := 0
			b := newBreaker(3, 10*time.Second, 25*time.Second, func(bool, error) { changes++ })
			b.now = func() time.Time { return now }
			for i, s := range c.steps {
				switch s.op {
				case "ok":
					b.success(s.probe)
				case "fail":
					b.failure(s.probe, errDown)
				case "wait":
					now = now.Add(s.wait)
				case "abandon":
					b.abandon(true)
				case "allow", "deny", "probe":
					ok, probe := b.allow()
					if ok != (s.op != "deny") || probe != (s.op == "probe") {
						t.Fatalf("step %d: allow() = %v, %v; want %s", i, ok, probe, s.op)
					}
				}
				if changes != s.changes {
					t.Fatalf("step %d (%s): %d state changes, want %d", i, s.op, changes, s.changes)
				}
				if s.op != "probe" && s.op != "deny" && b.closed() != s.closed {
					t.Fatalf("step %d (%s): closed = %v, want %v", i, s.op, b.closed(), s.closed)
				}
			}
		})
	}
}

func TestBreakerTrip(t *testing.T) {
	opened := 0
	b := newBreaker(3, time.Hour, time.Hour, func(open bool, _ error) {
		if open {
			opened++
		}
	})
	b.trip(errors.New("unreachable at mount"))
	b.trip(errors.New("again"))
	if ok, _ := b.allow(); ok || b.closed() || opened != 1 {
		t.Fatalf("after trip: allow %v closed %v opened %d", ok, b.closed(), opened)
	}
}
