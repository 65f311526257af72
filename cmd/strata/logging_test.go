package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLogDurationsHuman: a duration attribute is logged as "1.5s" in both
// formats, not as nanoseconds (what slog's JSON handler writes by default).
func TestLogDurationsHuman(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var b bytes.Buffer
		newLogger(&b, "info", format).Info("retrying", "in", 1500*time.Millisecond)
		if !strings.Contains(b.String(), "1.5s") || strings.Contains(b.String(), "1500000000") {
			t.Errorf("%s: %s", format, b.String())
		}
	}
}
