package config

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// The flag values of a mount: whatever the text, a parsed value is in
// range, means what the text says, and prints back to itself.

func TestTTLSecondsDoNotWrap(t *testing.T) {
	tests := []struct {
		in   string
		want TTL
		ok   bool
	}{
		{"90", TTL(90 * time.Second), true},
		{"9223372036", TTL(9223372036 * time.Second), true},
		{"9223372037", 0, false},  // wrapped to a negative TTL: "indefinite"
		{"18446744074", 0, false}, // wrapped to 0.29 s
		{"99999999999999999999", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseTTL(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseTTL(%q) = %v (%d), %v; want %v ok=%v", tc.in, got, int64(got), err, tc.want, tc.ok)
		}
	}
}

// TestSizeString: whole units print exactly, anything else with one
// decimal (10200 bytes used to print as an exact-looking "10KiB"). A
// size typed in decimal units prints in them (10GB printed as
// "9765625KiB", and 1MB as "976.6KiB").
func TestSizeString(t *testing.T) {
	tests := map[Size]string{0: "0", 512: "512B", 1 << 20: "1MiB", 10200: "10.0KiB", 5<<20 + 1<<19: "5632KiB", 5<<20 + 100: "5.0MiB", 15<<30 + 600<<20 + 1: "15.6GiB", 3 << 40: "3TiB",
		10e9: "10GB", 1e6: "1MB", 250e12: "250TB", 1536e6: "1536MB", 1000: "1KB", 1024000: "1000KiB"}
	for in, want := range tests {
		if got := in.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

func FuzzTTL(f *testing.F) {
	for _, s := range []string{"60", "9223372037", "1h", "0", "indefinite", "-1s", "1e9s", " 5m "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTTL(s)
		if err != nil {
			return
		}
		if d < 0 && d != Indefinite {
			t.Fatalf("ParseTTL(%q) = %d", s, int64(d))
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n > 0 && time.Duration(d) != time.Duration(n)*time.Second {
			t.Fatalf("ParseTTL(%q) = %v, not %d seconds", s, d, n)
		}
		if back, err := ParseTTL(d.String()); err != nil || back != d {
			t.Fatalf("ParseTTL(%q) = %v, which parses back as %v, %v", s, d, back, err)
		}
	})
}

func FuzzSizeAndMode(f *testing.F) {
	for _, s := range []string{"1MiB", "4.8MiB", "0", "100GiB", "0644", "0o7777", "18446744073709551615", "8EiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil {
			if n < 0 {
				t.Fatalf("ParseSize(%q) = %d", s, n)
			}
			// Whole units print exactly and parse back.
			if str := n.String(); !strings.Contains(str, ".") {
				if back, err := ParseSize(str); err != nil || back != n {
					t.Fatalf("ParseSize(%q) = %d prints %q, parsed back as %d, %v", s, n, str, back, err)
				}
			}
		}
		if m, err := ParseMode(s); err == nil {
			if m > 0o7777 {
				t.Fatalf("ParseMode(%q) = %o", s, m)
			}
			if back, err := ParseMode(m.String()); err != nil || back != m {
				t.Fatalf("mode %q -> %s -> %v, %v", s, m, back, err)
			}
		}
	})
}
