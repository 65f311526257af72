package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"
)

// newLogger returns the process logger: text on a terminal, JSON when
// asked (or when logging to a file with format auto).
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" || (format == "auto" && !isTerminal(w)) {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// fail prints one line naming the problem and exits non-zero.
func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "strata: "+format+"\n", a...)
	os.Exit(1)
}
