package shared

import (
	"io"
	"sync"
	"time"
)

// groupRef names one group of one object version.
type groupRef struct {
	id    ID
	group int64
}

// partial is a group whose blocks are arriving.
type partial struct {
	key, version string
	blocks       [][]byte // GroupBlocks slots, nil while missing
	n            int      // slots filled
	short        int      // slot of a short block (the object's last), -1 if none
	touched      time.Time
}

// assembler collects the blocks of each group until the group is whole:
// every slot filled, or every slot up to the object's last (short) block.
// A group that stops growing is swept after idle: if it holds a full-block
// prefix it may be whole (an object whose size is a multiple of the block
// size), which a resolve job settles; anything else is dropped.
type assembler struct {
	w    *writer
	l    Layout
	idle time.Duration
	now  func() time.Time

	mu     sync.Mutex // guards groups; a leaf, never held across I/O
	groups map[groupRef]*partial
}

// add files block b's data; it returns the group's job once it is whole.
func (a *assembler) add(key, version string, id ID, b int64, data []byte) *job {
	g := a.l.Group(b)
	ref, slot := groupRef{id, g}, int(b-a.l.FirstBlock(g))
	a.mu.Lock()
	p := a.groups[ref]
	if p == nil {
		p = &partial{key: key, version: version, blocks: make([][]byte, a.l.GroupBlocks), short: -1}
		a.groups[ref] = p
	}
	if p.blocks[slot] != nil {
		a.mu.Unlock()
		a.w.release(data) // the same block again: keep the first copy
		return nil
	}
	p.blocks[slot], p.n, p.touched = data, p.n+1, a.now()
	if int64(len(data)) < a.l.BlockSize {
		p.short = slot
	}
	whole, bad := p.state()
	if !whole && !bad {
		a.mu.Unlock()
		return nil
	}
	delete(a.groups, ref)
	a.mu.Unlock()
	j := &job{kind: jobPut, key: key, version: version, id: id, group: g, blocks: p.blocks[:p.n]}
	if bad {
		j.blocks = p.blocks
		a.w.drop(j)
		return nil
	}
	return j
}

// state says whether p is whole, or can never be (a block after a short
// one: the caller's reads were not of one object version's blocks).
func (p *partial) state() (whole, bad bool) {
	if p.short < 0 {
		return p.n == len(p.blocks), false
	}
	for i, b := range p.blocks {
		if (b != nil) != (i <= p.short) {
			return false, i > p.short
		}
	}
	return true, false
}

// sweep removes the groups idle for a.idle (all of them when all is set)
// and returns the resolve jobs of those that may be whole; the others are
// dropped.
func (a *assembler) sweep(all bool) []*job {
	now := a.now()
	var out, dropped []*job
	a.mu.Lock()
	for ref, p := range a.groups {
		if !all && now.Sub(p.touched) < a.idle {
			continue
		}
		delete(a.groups, ref)
		j := &job{kind: jobResolve, key: p.key, version: p.version, id: ref.id, group: ref.group, blocks: p.blocks}
		if p.short < 0 && p.n > 0 && prefix(p.blocks) == p.n {
			j.blocks = p.blocks[:p.n]
			out = append(out, j)
		} else {
			dropped = append(dropped, j)
		}
	}
	a.mu.Unlock()
	for _, j := range dropped {
		a.w.drop(j)
	}
	return out
}

// prefix counts the filled slots before the first empty one.
func prefix(blocks [][]byte) int {
	for i, b := range blocks {
		if b == nil {
			return i
		}
	}
	return len(blocks)
}

// recordsReader presents a group's records (header, data, header, ...) as
// one io.ReaderAt without copying the data.
type recordsReader struct {
	parts [][]byte
	size  int64
}

func newRecordsReader(seal Sealer, id ID, l Layout, first int64, blocks [][]byte) *recordsReader {
	hdrs := make([]byte, HeaderSize*len(blocks))
	r := &recordsReader{parts: make([][]byte, 0, 2*len(blocks))}
	for i, b := range blocks {
		h := hdrs[i*HeaderSize : (i+1)*HeaderSize]
		seal.Header(h, id, l, first+int64(i), b)
		r.parts = append(r.parts, h, b)
		r.size += int64(HeaderSize + len(b))
	}
	return r
}

func (r *recordsReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := 0
	for _, part := range r.parts {
		if len(p) == 0 {
			break
		}
		if off >= int64(len(part)) {
			off -= int64(len(part))
			continue
		}
		c := copy(p, part[off:])
		n, p, off = n+c, p[c:], 0
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}
