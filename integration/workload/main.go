package workload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is the main function of the benchmark and demo commands: it runs
// as a worker when started as one (MaybeRunWorker), parses the flags
// (-h exits 0, bad flags exit 2), then runs with a context that SIGINT
// and SIGTERM cancel, so that mounts and servers are torn down (a failed
// run exits 1). prog prefixes the error messages.
func Main[C any](prog string, parse func(args []string) (C, error), run func(ctx context.Context, cfg C) error) {
	MaybeRunWorker()
	cfg, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		os.Exit(1)
	}
}
