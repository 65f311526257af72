package main

import (
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
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: humanDurations}
	if format == "json" || (format == "auto" && !isTerminal(w)) {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// humanDurations prints durations as "1.5s", not as nanoseconds (what
// the JSON handler writes for a time.Duration otherwise).
func humanDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
