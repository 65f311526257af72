package backend_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stratafs/strata/backend"
)

// parts is a backend with every optional interface; each method records
// that it ran, so a test can tell whose method a call reached.
type parts struct {
	name  string
	calls *[]string
}

func (p parts) rec(m string) { *p.calls = append(*p.calls, p.name+"."+m) }

func (p parts) String() string { return p.name }
func (p parts) Stat(context.Context, string) (backend.ObjectInfo, error) {
	p.rec("Stat")
	return backend.ObjectInfo{}, nil
}
func (p parts) List(context.Context, string, backend.ListOptions) (backend.ListPage, error) {
	p.rec("List")
	return backend.ListPage{}, nil
}
func (p parts) ReadRange(context.Context, string, string, int64, int64) (io.ReadCloser, error) {
	p.rec("ReadRange")
	return nil, nil
}
func (p parts) ReadHead(context.Context, string, int64) (backend.ObjectInfo, []byte, error) {
	p.rec("ReadHead")
	return backend.ObjectInfo{}, nil, nil
}
func (p parts) Close() error                { p.rec("Close"); return nil }
func (p parts) Check(context.Context) error { p.rec("Check"); return nil }
func (p parts) Put(context.Context, string, io.ReaderAt, int64, backend.PutOptions) (backend.ObjectInfo, error) {
	p.rec("Put")
	return backend.ObjectInfo{}, nil
}
func (p parts) Copy(context.Context, string, string, string) (backend.ObjectInfo, error) {
	p.rec("Copy")
	return backend.ObjectInfo{}, nil
}
func (p parts) Delete(context.Context, string) error { p.rec("Delete"); return nil }

// inner builds a backend implementing Backend plus exactly the optional
// interfaces named in mask (Checker 1, Writer 2, Copier 4, Deleter 8).
func inner(p parts, mask int) backend.Backend {
	var o backend.Optional
	if mask&1 != 0 {
		o.Checker = p
	}
	if mask&2 != 0 {
		o.Writer = p
	}
	if mask&4 != 0 {
		o.Copier = p
	}
	if mask&8 != 0 {
		o.Deleter = p
	}
	// A full backend as "inner" lets Compose keep whatever o offers.
	return backend.Compose(p, p, o)
}

func ifaces(b backend.Backend) (check, write, cp, del bool) {
	_, check = b.(backend.Checker)
	_, write = b.(backend.Writer)
	_, cp = b.(backend.Copier)
	_, del = b.(backend.Deleter)
	return
}

// For every combination of optional interfaces of the wrapped backend,
// the result has exactly those, and calls reach the wrapper's methods.
func TestComposeKeepsExactlyInnerInterfaces(t *testing.T) {
	ctx := context.Background()
	for mask := 0; mask < 16; mask++ {
		t.Run(fmt.Sprintf("mask%04b", mask), func(t *testing.T) {
			var calls []string
			in := inner(parts{name: "inner", calls: &calls}, mask)
			c, w, cp, d := ifaces(in)
			if c != (mask&1 != 0) || w != (mask&2 != 0) || cp != (mask&4 != 0) || d != (mask&8 != 0) {
				t.Fatalf("inner has checker=%v writer=%v copier=%v deleter=%v", c, w, cp, d)
			}
			wr := parts{name: "wrapper", calls: &calls}
			got := backend.Compose(wr, in, backend.Optional{Checker: wr, Writer: wr, Copier: wr, Deleter: wr})
			gc, gw, gcp, gd := ifaces(got)
			if gc != c || gw != w || gcp != cp || gd != d {
				t.Fatalf("wrapped has checker=%v writer=%v copier=%v deleter=%v, want %v %v %v %v", gc, gw, gcp, gd, c, w, cp, d)
			}
			if _, ok := got.(backend.Closer); !ok {
				t.Fatal("wrapped is not a Closer")
			}
			calls = nil
			_, _ = got.Stat(ctx, "k")
			_, _ = got.List(ctx, "", backend.ListOptions{})
			_, _ = got.ReadRange(ctx, "k", "", 0, 1)
			_ = got.(backend.Closer).Close()
			want := []string{"wrapper.Stat", "wrapper.List", "wrapper.ReadRange", "wrapper.Close"}
			if gc {
				_ = got.(backend.Checker).Check(ctx)
				want = append(want, "wrapper.Check")
			}
			if gw {
				_, _ = got.(backend.Writer).Put(ctx, "k", nil, 0, backend.PutOptions{})
				want = append(want, "wrapper.Put")
			}
			if gcp {
				_, _ = got.(backend.Copier).Copy(ctx, "a", "", "b")
				want = append(want, "wrapper.Copy")
			}
			if gd {
				_ = got.(backend.Deleter).Delete(ctx, "k")
				want = append(want, "wrapper.Delete")
			}
			if fmt.Sprint(calls) != fmt.Sprint(want) {
				t.Errorf("calls %v, want %v", calls, want)
			}
			if got.String() != "wrapper" {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}

// An interface the wrapper does not offer is not claimed even when the
// wrapped backend has it, and the base's other methods stay hidden.
func TestComposeOmitsWhatWrapperLacks(t *testing.T) {
	var calls []string
	p := parts{name: "p", calls: &calls}
	got := backend.Compose(p, p, backend.Optional{Writer: p})
	c, w, cp, d := ifaces(got)
	if c || !w || cp || d {
		t.Errorf("checker=%v writer=%v copier=%v deleter=%v, want only writer", c, w, cp, d)
	}
}
