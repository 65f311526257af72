package shared

import "github.com/stratafs/strata/backend"

// Backend returns the tier as the backend the fetcher reads from. It also
// implements backend.Writer, Copier and Deleter exactly when the origin
// does, passing them through, so the write path sees the origin's
// abilities unchanged; and backend.Closer (Close).
func (t *Tier) Backend() backend.Backend {
	w, isW := t.origin.(backend.Writer)
	c, isC := t.origin.(backend.Copier)
	d, isD := t.origin.(backend.Deleter)
	switch {
	case isW && isC && isD:
		return struct {
			*Tier
			backend.Writer
			backend.Copier
			backend.Deleter
		}{t, w, c, d}
	case isW && isC:
		return struct {
			*Tier
			backend.Writer
			backend.Copier
		}{t, w, c}
	case isW && isD:
		return struct {
			*Tier
			backend.Writer
			backend.Deleter
		}{t, w, d}
	case isC && isD:
		return struct {
			*Tier
			backend.Copier
			backend.Deleter
		}{t, c, d}
	case isW:
		return struct {
			*Tier
			backend.Writer
		}{t, w}
	case isC:
		return struct {
			*Tier
			backend.Copier
		}{t, c}
	case isD:
		return struct {
			*Tier
			backend.Deleter
		}{t, d}
	}
	return t
}
