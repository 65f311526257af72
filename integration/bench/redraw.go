package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// redrawCharts draws the charts of a finished run again from its
// results.json (after a change to how charts are drawn), in the same
// directory, leaving results.md as the run wrote it. It returns the
// charts' names.
func redrawCharts(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return nil, fmt.Errorf("bench: redraw: %w", err)
	}
	var js struct {
		Rows []Row `json:"rows"`
	}
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("bench: redraw %s: %w", dir, err)
	}
	var names []string
	for _, r := range js.Rows {
		if !slices.Contains(names, r.Latency) {
			names = append(names, r.Latency)
		}
	}
	lats, err := parseLatencies(strings.Join(names, ","))
	if err != nil {
		return nil, fmt.Errorf("bench: redraw %s: %w", dir, err)
	}
	slices.Sort(lats)
	// A family with nothing to draw now must not keep an older picture.
	old, _ := filepath.Glob(filepath.Join(dir, "chart-*.png"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return nil, fmt.Errorf("bench: redraw: %w", err)
		}
	}
	cfg := Config{Latencies: lats, Systems: systemNames(), Workloads: workloadNames()}
	return writeCharts(dir, &Results{Rows: js.Rows}, cfg)
}
