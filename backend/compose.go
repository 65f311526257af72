package backend

import "context"

// Base is what every wrapper offers whatever it wraps: the read side,
// Close (a wrapper's Close releases its own resources and closes what it
// wraps when that is a Closer) and ReadHead (ErrNotSupported when what it
// wraps has none).
type Base interface {
	Backend
	Closer
	HeadReader
}

// Optional holds a wrapper's own implementations of the optional
// interfaces it can pass through. A nil field is one the wrapper does not
// offer at all.
type Optional struct {
	Checker Checker
	Writer  Writer
	Copier  Copier
	Deleter Deleter
}

// Compose returns base extended with each of opt's implementations whose
// interface inner (the wrapped backend) implements too: a type assertion
// for Checker, Writer, Copier or Deleter on the result answers as it would
// on inner (or no, where the wrapper does not offer that interface). Only
// the methods of Base and of the interfaces kept are reachable through the
// result, whatever else base's dynamic type has.
func Compose(base Base, inner Backend, opt Optional) Backend {
	var mask int
	if _, ok := inner.(Checker); ok && opt.Checker != nil {
		mask |= hasChecker
	}
	if _, ok := inner.(Writer); ok && opt.Writer != nil {
		mask |= hasWriter
	}
	if _, ok := inner.(Copier); ok && opt.Copier != nil {
		mask |= hasCopier
	}
	if _, ok := inner.(Deleter); ok && opt.Deleter != nil {
		mask |= hasDeleter
	}
	return composers[mask](base, opt)
}

const (
	hasChecker = 1 << iota
	hasWriter
	hasCopier
	hasDeleter
)

// composers[mask] builds the value keeping exactly the interfaces in mask.
var composers = [16]func(Base, Optional) Backend{
	0: func(b Base, _ Optional) Backend { return struct{ Base }{b} },
	hasChecker: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
		}{b, o.Checker}
	},
	hasWriter: func(b Base, o Optional) Backend {
		return struct {
			Base
			WriterParts
		}{b, withParts(o.Writer)}
	},
	hasChecker | hasWriter: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
			WriterParts
		}{b, o.Checker, withParts(o.Writer)}
	},
	hasCopier: func(b Base, o Optional) Backend {
		return struct {
			Base
			Copier
		}{b, o.Copier}
	},
	hasChecker | hasCopier: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
			Copier
		}{b, o.Checker, o.Copier}
	},
	hasWriter | hasCopier: func(b Base, o Optional) Backend {
		return struct {
			Base
			WriterParts
			Copier
		}{b, withParts(o.Writer), o.Copier}
	},
	hasChecker | hasWriter | hasCopier: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
			WriterParts
			Copier
		}{b, o.Checker, withParts(o.Writer), o.Copier}
	},
	hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			Deleter
		}{b, o.Deleter}
	},
	hasChecker | hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
			Deleter
		}{b, o.Checker, o.Deleter}
	},
	hasWriter | hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			WriterParts
			Deleter
		}{b, withParts(o.Writer), o.Deleter}
	},
	hasChecker | hasWriter | hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
			WriterParts
			Deleter
		}{b, o.Checker, withParts(o.Writer), o.Deleter}
	},
	hasCopier | hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			Copier
			Deleter
		}{b, o.Copier, o.Deleter}
	},
	hasChecker | hasCopier | hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
			Copier
			Deleter
		}{b, o.Checker, o.Copier, o.Deleter}
	},
	hasWriter | hasCopier | hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			WriterParts
			Copier
			Deleter
		}{b, withParts(o.Writer), o.Copier, o.Deleter}
	},
	hasChecker | hasWriter | hasCopier | hasDeleter: func(b Base, o Optional) Backend {
		return struct {
			Base
			Checker
			WriterParts
			Copier
			Deleter
		}{b, o.Checker, withParts(o.Writer), o.Copier, o.Deleter}
	},
}

// WriterParts is the Writer a composed backend offers: a Writer that
// answers PartWriter too (ErrNotSupported where the wrapper's Writer
// cannot send parts), so that an eager upload reaches through wrappers.
type WriterParts interface {
	Writer
	PartWriter
}

// withParts makes w a WriterParts.
func withParts(w Writer) WriterParts {
	if wp, ok := w.(WriterParts); ok {
		return wp
	}
	return noParts{w}
}

type noParts struct{ Writer }

func (noParts) BeginParts(context.Context, string) (PartUpload, error) {
	return nil, ErrNotSupported
}

func (noParts) AbortParts(context.Context, string, string) error { return ErrNotSupported }
