package workload

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median odd", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"median even takes lower", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100", hundred, 99, 99 * time.Millisecond},
		{"p100", hundred, 100, 100 * time.Millisecond},
		{"p1", hundred, 1, 1 * time.Millisecond},
		{"p0 is min", hundred, 0, 1 * time.Millisecond},
		{"p99 of 10 is max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.q); got != tc.want {
				t.Errorf("Percentile(q=%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	res := []WorkerResult{
		{Ops: 2, Bytes: 2e6, StartNS: 1_000_000_000, EndNS: 1_500_000_000, LatNS: []int64{3e6, 1e6}},
		{Ops: 2, Bytes: 2e6, StartNS: 1_100_000_000, EndNS: 2_000_000_000, LatNS: []int64{2e6, 4e6}, Truncated: true},
	}
	s := Summarize(res)
	if s.Ops != 4 || s.Bytes != 4e6 || s.Procs != 2 {
		t.Fatalf("counts: %+v", s)
	}
	if s.Elapsed != time.Second {
		t.Errorf("elapsed %v, want 1s (earliest start to latest end)", s.Elapsed)
	}
	if s.OpsPerSec() != 4 || s.MBps() != 4 {
		t.Errorf("rates: %v ops/s %v MB/s", s.OpsPerSec(), s.MBps())
	}
	if s.P50 != 2*time.Millisecond || s.P99 != 4*time.Millisecond || s.Max != 4*time.Millisecond {
		t.Errorf("latencies: p50 %v p99 %v max %v", s.P50, s.P99, s.Max)
	}
	if !s.Truncated {
		t.Error("truncation lost")
	}
	if (Summary{}).OpsPerSec() != 0 || (Summary{}).MBps() != 0 {
		t.Error("zero summary must give zero rates")
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "-"},
		{85 * time.Microsecond, "85µs"},
		{1200 * time.Microsecond, "1.20ms"},
		{23400 * time.Microsecond, "23.4ms"},
		{2310 * time.Millisecond, "2.31s"},
	}
	for _, tc := range tests {
		if got := FormatLatency(tc.d); got != tc.want {
			t.Errorf("FormatLatency(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	sizes := map[int64]string{0: "0B", 128 << 10: "128KiB", 1 << 30: "1GiB", 3 << 29: "1.5GiB"}
	for n, want := range sizes {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestShuffled(t *testing.T) {
	a, b, c := Shuffled(100, 1), Shuffled(100, 1), Shuffled(100, 2)
	seen := map[int]bool{}
	same := true
	for i := range a {
		seen[a[i]] = true
		if a[i] != b[i] {
			t.Fatal("same seed, different order")
		}
		same = same && a[i] == c[i]
	}
	if len(seen) != 100 {
		t.Fatal("not a permutation")
	}
	if same {
		t.Error("different seeds gave the same order")
	}
	for i, v := range Shuffled(5, 0) {
		if v != i {
			t.Fatal("seed 0 must keep order")
		}
	}
}
