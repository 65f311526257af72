package main

import (
	"os"
	"testing"

	"github.com/stratafs/strata/integration/workload"
)

// TestMain lets the reader processes (this test binary re-executed) run.
func TestMain(m *testing.M) {
	workload.MaybeRunWorker()
	os.Exit(m.Run())
}
