package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/stratafs/strata/integration/workload"
)

// writeReport prints the markdown report to out and saves results.md,
// results.json and a chart-FAMILY.png per workload family in the output
// directory.
func (r *Run) writeReport(out io.Writer) error {
	var b strings.Builder
	r.markdown(&b)
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	dir := r.Cfg.OutDir
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	js, err := json.MarshalIndent(map[string]any{
		"started": r.Started, "elapsed_s": r.Elapsed.Seconds(), "scale": r.Cfg.Scale.Name,
		"machine": r.machine(), "versions": r.Versions, "skipped": r.Skipped,
		"skipped_workloads": r.SkippedWorkloads, "rows": r.Results.Rows,
		"setup_s": r.Setup.Seconds(), "workload_s": seconds(r.Spent),
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	files := []string{"results.md", "results.json"}
	if r.Cfg.Chart && len(r.Results.Rows) > 0 {
		charts, err := writeCharts(dir, r.Results, r.Cfg)
		if err != nil {
			return err
		}
		files = append(files, charts...)
	}
	fmt.Fprintf(out, "Results written to %s (%s).\n", dir, strings.Join(files, ", "))
	return nil
}

func (r *Run) machine() workload.Machine {
	if r.Env != nil {
		return r.Env.Machine
	}
	return workload.Machine{}
}

// markdown renders the whole report.
func (r *Run) markdown(w io.Writer) {
	fmt.Fprintf(w, "## Strata benchmark (%s scale)\n\n", r.Cfg.Scale.Name)
	fmt.Fprintf(w, "- command: `strata-bench %s`\n", strings.Join(r.Args, " "))
	fmt.Fprintf(w, "- machine: %s\n", r.machine())
	fmt.Fprintf(w, "- run: %s, took %s; load average %s at the start, %s at the end (other work on the machine skews figures)\n",
		r.Started.Format(time.RFC3339), r.Elapsed.Round(time.Second), r.LoadStart, r.LoadEnd)
	if spent := r.timeSpent(); spent != "" {
		fmt.Fprintf(w, "- time spent: %s\n", spent)
	}
	server := "one MinIO"
	if r.Cfg.Backend == "gcs" {
		server = "one fake-gcs-server (gs://; MinIO only for the second node's shared tier)"
	}
	fmt.Fprintf(w, "- server: %s on the same machine; latency injected per response by toxiproxy (0 ms = the proxy alone)\n", server)
	fmt.Fprintf(w, "- method: every phase starts with the page cache dropped (`echo 3 > /proc/sys/vm/drop_caches`); cold = empty client cache, warm = cache filled by the previous phase; warm phases (and all phases of local disk and the GET client, every DataLoader phase and the ImageFolder's restarted epochs, each on a mount just restarted) run %d times and the median run is shown; readers are separate processes; MB = 10^6 bytes; p50/p99 per file (per pread, per directory for listings, the wait per batch for the DataLoader)\n", r.Cfg.Repeat)
	if r.Env != nil {
		for _, n := range r.Env.Notes {
			fmt.Fprintf(w, "- note: %s\n", n)
		}
	}
	for _, name := range workloadNames() {
		if why, ok := r.SkippedWorkloads[name]; ok {
			fmt.Fprintf(w, "- workload %s: skipped: %s\n", name, why)
		}
	}
	fmt.Fprintln(w)
	for _, s := range sections(r.Results, r.Cfg) {
		writeTable(w, r.Results, s)
	}
	var lats []string
	for _, l := range r.Cfg.Latencies {
		lats = append(lats, Latency{Delay: l}.Name())
	}
	if contains(r.Cfg.Systems, subjectName) {
		writeTargets(w, evaluate(r.Results, lats))
	}
	fmt.Fprintln(w, "### Systems")
	fmt.Fprintln(w)
	for _, s := range allSystems(r.Cfg) {
		if !contains(r.Cfg.Systems, s.Name) {
			continue
		}
		if why, ok := r.Skipped[s.Name]; ok {
			fmt.Fprintf(w, "- %s: skipped: %s\n", s.Name, why)
			continue
		}
		fmt.Fprintf(w, "- %s: %s", s.Name, r.Versions[s.Name])
		if c := r.Commands[s.Name]; c != "" {
			fmt.Fprintf(w, "; mounted as `%s`", c)
		}
		fmt.Fprintln(w)
	}
	var failed []string
	for _, row := range r.Results.Rows {
		if row.Err != "" {
			failed = append(failed, fmt.Sprintf("%s/%s/%s/%s: %s", row.Workload, row.Phase, row.Latency, row.System, shorten(row.Err, 400)))
		}
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		fmt.Fprintln(w, "\n### Failures")
		fmt.Fprintln(w)
		for _, f := range failed {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}
	fmt.Fprintln(w)
}

// timeSpent says where the run's time went: setup, then each workload
// (over every system and latency) in report order.
func (r *Run) timeSpent() string {
	if r.Setup == 0 && len(r.Spent) == 0 {
		return ""
	}
	parts := []string{"setup (data, upload, servers) " + r.Setup.Round(time.Second).String()}
	for _, name := range workloadNames() {
		if d, ok := r.Spent[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %s", name, d.Round(time.Second)))
		}
	}
	return strings.Join(parts, ", ")
}

// seconds converts durations for results.json.
func seconds(m map[string]time.Duration) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, d := range m {
		out[k] = d.Seconds()
	}
	return out
}
