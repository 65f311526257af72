package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/stratafs/strata/integration/workload"
)

// Section is one workload's rows in report order.
type Section struct {
	Workload Workload
	Title    string
	Rows     []Row
}

// sections groups rows by workload (in allWorkloads order) and orders each
// group by phase (first seen), latency (as configured) and system
// (allSystems order: local disk first).
func sections(res *Results, cfg Config) []Section {
	sysOrder := map[string]int{}
	for i, s := range allSystems(cfg) {
		sysOrder[s.Name] = i
	}
	latOrder := map[string]int{}
	for i, l := range cfg.Latencies {
		latOrder[Latency{Delay: l}.Name()] = i
	}
	var out []Section
	for _, w := range allWorkloads() {
		var rows []Row
		phaseOrder := map[string]int{}
		for _, r := range res.Rows {
			if r.Workload != w.Name() {
				continue
			}
			if _, ok := phaseOrder[r.Phase]; !ok {
				phaseOrder[r.Phase] = len(phaseOrder)
			}
			rows = append(rows, r)
		}
		if len(rows) == 0 {
			continue
		}
		slices.SortStableFunc(rows, func(a, b Row) int {
			if d := phaseOrder[a.Phase] - phaseOrder[b.Phase]; d != 0 {
				return d
			}
			if d := latOrder[a.Latency] - latOrder[b.Latency]; d != 0 {
				return d
			}
			return sysOrder[a.System] - sysOrder[b.System]
		})
		out = append(out, Section{Workload: w, Title: w.Title(cfg), Rows: rows})
	}
	return out
}

// writeTable prints one section as a markdown table. Subject rows get
// ratios against local disk, the best peer and the GET client.
func writeTable(w io.Writer, res *Results, s Section) {
	fmt.Fprintf(w, "### %s\n\n", s.Title)
	unit := s.Workload.Unit()
	mb := showMBps(unit)
	head, align := "| phase | latency | system | "+unit+" | ", "|---|---|---|--:|"
	if mb {
		head, align = head+"MB/s | ", align+"--:|"
	}
	fmt.Fprintln(w, head+"p50 | p99 | × local | × best peer | × GET | notes |")
	fmt.Fprintln(w, align+"--:|--:|--:|--:|--:|---|")
	for _, r := range s.Rows {
		fmt.Fprintln(w, formatRow(res, r, mb))
	}
	fmt.Fprintln(w)
}

// showMBps says whether a table gets a MB/s column beside its headline
// unit (not when the unit is MB/s already, nor for listings).
func showMBps(unit string) bool { return unit != "MB/s" && unit != "entries/s" }

// formatRow renders one table line.
func formatRow(res *Results, r Row, mb bool) string {
	cells := []string{r.Phase, r.Latency, systemLabel(r)}
	if !r.OK() {
		msg := r.Err
		if msg == "" {
			msg = "no measurement"
		}
		cells = append(cells, "—", "—", "—", "", "", "")
		if mb {
			cells = append(cells, "—")
		}
		cells = append(cells, "failed: "+shorten(msg, 160))
		return "| " + strings.Join(cells, " | ") + " |"
	}
	s := r.Summary
	rate := formatRate(r.Rate)
	if r.Rate == 0 {
		rate = "0" // measured: none (an AU search with no accelerator at 90%)
	}
	cells = append(cells, rate)
	if mb {
		cells = append(cells, formatRate(s.MBps()))
	}
	cells = append(cells, workload.FormatLatency(s.P50), workload.FormatLatency(s.P99))
	if r.Role == RoleSubject {
		local, okL := res.Local(r)
		peer, okP := res.BestPeer(r)
		ref, okR := res.Reference(r)
		peerCell := formatRatio(ratio(r, peer, okP))
		if peerCell != "" {
			peerCell += " (" + peer.System + ")"
		}
		cells = append(cells, formatRatio(ratio(r, local, okL)), peerCell, formatRatio(ratio(r, ref, okR)))
	} else {
		cells = append(cells, "", "", "")
	}
	cells = append(cells, r.Note)
	return "| " + strings.Join(cells, " | ") + " |"
}

func systemLabel(r Row) string {
	if r.System == indefiniteName {
		return "**strata (--metadata-ttl indefinite)**"
	}
	if r.System == userspaceName {
		return "**strata (--passthrough off)**"
	}
	if r.System == sidecarName {
		return "**strata (CSI sidecar mode)**"
	}
	if r.Role == RoleSubject {
		return "**" + r.System + "**"
	}
	return r.System
}

// formatRate prints a rate with about three significant figures.
func formatRate(v float64) string {
	switch {
	case v <= 0:
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// formatRatio prints "1.23×", or "" when there is nothing to compare.
func formatRatio(v float64) string {
	switch {
	case v <= 0:
		return ""
	case v >= 100:
		return fmt.Sprintf("%.0f×", v)
	case v >= 10:
		return fmt.Sprintf("%.1f×", v)
	default:
		return fmt.Sprintf("%.2f×", v)
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
