package prefetch

// Pattern is what a handle's reads look like so far.
type Pattern int

const (
	Sequential Pattern = iota
	Strided
	Random
)

func (p Pattern) String() string { return [...]string{"sequential", "strided", "random"}[p] }

// detector classifies one handle's reads and sizes its readahead window.
// Reads that land near where the last one ended count as sequential: the
// kernel issues readahead asynchronously, so a sequential stream reaches
// the daemon slightly out of order.
type detector struct {
	initial, max int64

	next    int64 // where a sequential read would start
	last    int64 // offset of the previous read
	stride  int64
	strides int   // consecutive reads at the same stride
	run     int64 // bytes read in the current sequential run
	window  int64
	reads   int
}

func newDetector(initial, max int64) detector {
	return detector{initial: initial, max: max, window: initial}
}

// observe records a read of n bytes at off and returns the pattern.
func (d *detector) observe(off, n int64) Pattern {
	d.reads++
	delta := off - d.last
	slack := max(d.window, d.initial)
	var p Pattern
	switch {
	case off >= d.next-slack && off <= d.next+slack:
		p = Sequential
		d.run += n
		for d.run >= d.window && d.window < d.max {
			d.window = min(d.window*2, d.max)
		}
		d.strides = 0
	case d.reads > 1 && delta == d.stride && delta > n:
		d.strides++
		p = Strided
		if d.strides < 2 {
			p = Random
		}
	default:
		p = Random
		d.stride = delta
		d.strides = 0
		d.run = 0
		d.window = d.initial
	}
	d.last = off
	d.next = max(d.next, off+n)
	if p != Sequential {
		d.next = off + n
	}
	return p
}
