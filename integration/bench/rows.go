package main

import (
	"github.com/stratafs/strata/integration/workload"
)

// Row is one measured phase of one workload on one system at one latency.
type Row struct {
	Workload string `json:"workload"`
	Phase    string `json:"phase"`
	// Latency is the block the row was measured in ("0ms", "20ms"); local
	// disk rows are measured in every block, without the network.
	Latency string `json:"latency"`
	System  string `json:"system"`
	Role    Role   `json:"role"`
	// Unit names Rate, the workload's headline figure (higher is better):
	// files/s, MB/s, ops/s, entries/s.
	Unit    string           `json:"unit"`
	Rate    float64          `json:"rate"`
	Summary workload.Summary `json:"summary"`
	// Runs are the rates of every run of a repeated phase, lowest first
	// (Rate is their median).
	Runs []float64 `json:"runs,omitempty"`
	// Note carries facts such as the cache hit ratio.
	Note string `json:"note,omitempty"`
	// Err is set when the phase failed or could not run.
	Err string `json:"error,omitempty"`
}

// OK reports whether the row has a measurement. A rate of zero is one
// when the phase did its work (the AU search: no accelerator kept at 90%).
func (r Row) OK() bool { return r.Err == "" && (r.Rate > 0 || r.Summary.Ops > 0) }

// Results are all rows of a run, in the order measured.
type Results struct {
	Rows []Row `json:"rows"`
}

// Add appends rows.
func (res *Results) Add(rows ...Row) { res.Rows = append(res.Rows, rows...) }

// find returns the first measured row matching.
func (res *Results) find(match func(Row) bool) (Row, bool) {
	for _, r := range res.Rows {
		if r.OK() && match(r) {
			return r, true
		}
	}
	return Row{}, false
}

// ran reports whether any row, failed or not, is of workload at latency.
func (res *Results) ran(workload, latency string) bool {
	for _, r := range res.Rows {
		if r.Workload == workload && r.Latency == latency {
			return true
		}
	}
	return false
}

// Local is the local-disk row of the same workload and phase, measured in
// the same latency block.
func (res *Results) Local(r Row) (Row, bool) {
	return res.find(func(x Row) bool {
		return x.Role == RoleLocal && x.Workload == r.Workload && x.Phase == r.Phase && x.Latency == r.Latency
	})
}

// BestPeer is the peer row with the highest rate for the same workload,
// phase and latency.
func (res *Results) BestPeer(r Row) (Row, bool) {
	var best Row
	found := false
	for _, x := range res.Rows {
		if x.OK() && x.Role == RolePeer && x.Workload == r.Workload && x.Phase == r.Phase &&
			x.Latency == r.Latency && (!found || x.Rate > best.Rate) {
			best, found = x, true
		}
	}
	return best, found
}

// Reference is the GET client's row for the same workload, phase and
// latency.
func (res *Results) Reference(r Row) (Row, bool) {
	return res.find(func(x Row) bool {
		return x.Role == RoleReference && x.Workload == r.Workload && x.Phase == r.Phase && x.Latency == r.Latency
	})
}

// System is the row of a named system for the same workload, phase and
// latency.
func (res *Results) System(r Row, name, phase string) (Row, bool) {
	return res.find(func(x Row) bool {
		return x.System == name && x.Workload == r.Workload && x.Phase == phase && x.Latency == r.Latency
	})
}

// ratio returns a/b, or 0 when either is missing.
func ratio(a Row, b Row, ok bool) float64 {
	if !ok || !a.OK() || !b.OK() || b.Rate == 0 {
		return 0
	}
	return a.Rate / b.Rate
}
