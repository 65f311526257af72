package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// Size is a byte count written like 100GiB, 512MiB, 1.5TB or 1048576.
type Size int64

// ParseSize parses a size; "0" is zero.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("size %q: empty", s)
	}
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("size %q: negative", s)
	}
	n, err := humanize.ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("size %q: want a byte count like 100GiB, 512MiB or 1048576", s)
	}
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return Size(n), nil
}

// String renders the size exactly when it is a whole number of some unit,
// in the unit that gives the smallest number, IEC or SI (1MiB, 100GiB;
// 10GB, which is 9765625KiB), else in IEC units to one decimal (4.8MiB).
func (s Size) String() string {
	if s == 0 {
		return "0"
	}
	type unit struct {
		name string
		n    Size
	}
	iec := []unit{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	si := []unit{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}}
	best := unit{"B", 1}
	for _, u := range append(iec, si...) {
		if s >= u.n && s%u.n == 0 && s/u.n < s/best.n {
			best = u
		}
	}
	if best.n > 1 || s < 1<<10 {
		return strconv.FormatInt(int64(s/best.n), 10) + best.name
	}
	// Not whole: one decimal, always (humanize drops it from 10 units up,
	// so 10200 bytes printed as an exact-looking "10KiB").
	for _, u := range iec {
		if s >= u.n {
			return strconv.FormatFloat(float64(s)/float64(u.n), 'f', 1, 64) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// Set and Type make Size a pflag.Value.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// Type names the flag's value in help.
func (s *Size) Type() string { return "size" }

// TTL is a metadata TTL: a duration, 0 (always revalidate) or Indefinite.
type TTL time.Duration

// Indefinite never expires.
const Indefinite TTL = -1

// ParseTTL parses "60s", "5m", "0" or "indefinite".
func ParseTTL(s string) (TTL, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	switch t {
	case "indefinite", "infinite", "forever":
		return Indefinite, nil
	case "0":
		return 0, nil
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil && n > 0 {
		if n > math.MaxInt64/int64(time.Second) { // would wrap (to "indefinite", or to 0.29s)
			return 0, fmt.Errorf("metadata TTL %q: too long (use indefinite)", s)
		}
		return TTL(time.Duration(n) * time.Second), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("metadata TTL %q: want a duration (60s, 5m), 0 or indefinite", s)
	}
	return TTL(d), nil
}

func (t TTL) String() string {
	if t < 0 {
		return "indefinite"
	}
	return time.Duration(t).String()
}

// Set and Type make TTL a pflag.Value.
func (t *TTL) Set(v string) error {
	n, err := ParseTTL(v)
	if err != nil {
		return err
	}
	*t = n
	return nil
}

// Type names the flag's value in help.
func (t *TTL) Type() string { return "ttl" }

// Mode is an octal permission like 0644.
type Mode uint32

// ParseMode parses octal permission bits.
func ParseMode(s string) (Mode, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0o"), 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("mode %q: want octal permission bits like 0644", s)
	}
	return Mode(n), nil
}

func (m Mode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// Set and Type make Mode a pflag.Value.
func (m *Mode) Set(v string) error {
	n, err := ParseMode(v)
	if err != nil {
		return err
	}
	*m = n
	return nil
}

// Type names the flag's value in help.
func (m *Mode) Type() string { return "mode" }

// FormatBytes is n for people: "512B" below a KiB, else as Size prints
// it ("1.5MiB"); negative counts print as "0B".
func FormatBytes(n int64) string {
	if n < 0 {
		n = 0
	}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	return Size(n).String()
}
