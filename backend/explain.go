package backend

// Explained is an error written for the person who ran the command: its
// text says what is wrong and what to do, once, while errors.Is and
// errors.As still find the sentinel and the client's own error behind it.
// Backends return one from Check, where the error ends up on a terminal;
// a caller that adds context of its own should not add the same hint again
// (errors.As(err, new(*Explained)) tells it the backend explained already).
type Explained struct {
	text string
	errs []error
}

// Explain returns an Explained with text, wrapping the sentinel and the
// underlying cause (either may be nil).
func Explain(text string, sentinel, cause error) *Explained {
	e := &Explained{text: text}
	for _, err := range []error{sentinel, cause} {
		if err != nil {
			e.errs = append(e.errs, err)
		}
	}
	return e
}

func (e *Explained) Error() string   { return e.text }
func (e *Explained) Unwrap() []error { return e.errs }
