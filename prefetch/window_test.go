package prefetch

import "testing"

// The window counters: sequential reads top the window up (and it grows
// from the initial size), random reads never do.
func TestWindowStats(t *testing.T) {
	tests := []struct {
		name       string
		sequential bool
		wantTopUps bool
	}{
		{name: "sequential", sequential: true, wantTopUps: true},
		{name: "random", sequential: false, wantTopUps: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 64, nil)
			data, o := e.object(t, "obj", 40*bs)
			r := e.f.NewReader(o)
			if tc.sequential {
				readSeq(t, r, len(data), 16<<10)
			} else {
				buf := make([]byte, 4<<10)
				for _, blk := range []int64{31, 3, 17, 9, 25, 1, 36} {
					if _, err := r.ReadAt(t.Context(), buf, blk*bs+100); err != nil {
						t.Fatal(err)
					}
				}
			}
			waitIdle(t, e.f)
			st := e.f.Stats()
			n, sum := st.WindowTopUps.Load(), st.WindowBytes.Load()
			if (n > 0) != tc.wantTopUps {
				t.Fatalf("top-ups = %d, want some: %v", n, tc.wantTopUps)
			}
			if n == 0 {
				if sum != 0 {
					t.Fatalf("window bytes %d without top-ups", sum)
				}
				return
			}
			opts := e.f.Options()
			if mean := sum / n; mean < opts.InitialWindow || mean > opts.MaxWindow {
				t.Fatalf("mean window %d outside [%d, %d]", mean, opts.InitialWindow, opts.MaxWindow)
			}
			if sum <= n*opts.InitialWindow {
				t.Fatalf("window never grew past the initial %d (sum %d over %d top-ups)", opts.InitialWindow, sum, n)
			}
		})
	}
}
