package main

import (
	"log/slog"
	"net/http"
	_ "net/http/pprof" // registered on http.DefaultServeMux, served only when asked
	"os"
)

// startDebug serves Go's profiler when STRATA_PPROF=host:port is set: the
// way to measure before optimising a running mount. Off by default.
func startDebug(log *slog.Logger) {
	addr := os.Getenv("STRATA_PPROF")
	if addr == "" {
		return
	}
	go func() {
		log.Info("profiler listening", "addr", addr)
		if err := http.ListenAndServe(addr, nil); err != nil {
			log.Warn("profiler", "err", err)
		}
	}()
}
