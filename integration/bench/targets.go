package main

import (
	"fmt"
	"io"
)

// Target is one bar of issue #3, checked against a run's rows (printed,
// never asserted).
type Target struct {
	Desc     string
	Workload string
	Phase    string
	// Latency restricts the target to one latency ("" checks each).
	Latency string
	// Against finds the row to compare with and names it.
	Against func(res *Results, r Row) (Row, bool)
	Bar     float64
	// System is the row's system; "" means strata.
	System string
}

// subjectName is the system the targets are about.
const subjectName = "strata"

func targets() []Target {
	local := func(res *Results, r Row) (Row, bool) { return res.Local(r) }
	peer := func(res *Results, r Row) (Row, bool) { return res.BestPeer(r) }
	ref := func(res *Results, r Row) (Row, bool) { return res.Reference(r) }
	system := func(name, phase string) func(*Results, Row) (Row, bool) {
		return func(res *Results, r Row) (Row, bool) { return res.System(r, name, phase) }
	}
	// bar is a fixed rate (a time bound turned into a rate).
	bar := func(rate float64, unit string) func(*Results, Row) (Row, bool) {
		return func(*Results, Row) (Row, bool) { return Row{System: "the bar", Rate: rate, Unit: unit}, true }
	}
	return []Target{
		{Desc: "warm ImageFolder epoch ≥ 0.8× local disk files/s", Workload: "imagefolder", Phase: phaseWarm, Latency: "", Against: local, Bar: 0.8},
		{Desc: "warm ImageFolder epoch ≥ 8× rclone's warm epoch", Workload: "imagefolder", Phase: phaseWarm, Latency: "", Against: system("rclone", phaseWarm), Bar: 8},
		{Desc: "warm sequential ≥ 0.9× local disk", Workload: "webdataset", Phase: "warm", Latency: "", Against: local, Bar: 0.9},
		{Desc: "cold sequential ≥ 0.9× the parallel GET client", Workload: "webdataset", Phase: "cold", Latency: "", Against: ref, Bar: 0.9},
		{Desc: "cold sequential ≥ 2× the best peer at 20 ms", Workload: "webdataset", Phase: "cold", Latency: "20ms", Against: peer, Bar: 2},
		{Desc: "cold ImageFolder epoch ≥ 3× the best peer at 20 ms", Workload: "imagefolder", Phase: phaseCold, Latency: "20ms", Against: peer, Bar: 3},
		{Desc: "restarted mount's first epoch ≈ a warm epoch (≥ 0.9×)", Workload: "imagefolder", Phase: phaseRestart, Latency: "", Against: system(subjectName, phaseWarm), Bar: 0.9},
		// Issue #13: async checkpoint writes at local-disk speed (local
		// disk fsyncs before close in these rows).
		{Desc: "async torch.save close ≥ 0.9× local disk torch.save+fsync", Workload: "checkpoint",
			Phase: phaseSave, Against: local, Bar: 0.9, System: asyncName},
		{Desc: "async torch.save over an existing file ≥ 0.9× local disk's", Workload: "checkpoint",
			Phase: phaseResave, Against: local, Bar: 0.9, System: asyncName},
		{Desc: "async Hugging Face checkpoint writes ≥ 0.9× local disk writes+fsync", Workload: "checkpoint",
			Phase: phaseHFWrite, Against: local, Bar: 0.9, System: asyncName},
		{Desc: "sync torch.save until whole in the bucket ≥ 0.9× a plain multipart upload of the file", Workload: "checkpoint",
			Phase: phaseSaveBucket, Against: ref, Bar: 0.9},
		// Issue #15: the first epoch and the namespace at the speed of the
		// wire.
		{Desc: "first `ls -lR` (100,000 keys in 100 directories) ≥ 5× the GET client's per-directory walk at 20 ms", Workload: "listing",
			Phase: "first listing", Latency: "20ms", Against: system("get", phasePerDirectory), Bar: 5},
		{Desc: "first `ls -lR` (20,000 keys in 2,000 directories) ≥ 5× the GET client's per-directory walk at 20 ms", Workload: "listing-deep",
			Phase: "first listing", Latency: "20ms", Against: system("get", phasePerDirectory), Bar: 5},
		{Desc: "mount to the first batch of 256 files (100,000-key bucket) under 2 s at 20 ms", Workload: "listing",
			Phase: phaseFirstBatch, Latency: "20ms", Against: bar(firstBatchFiles/2.0, "files/s (256 files in 2 s)"), Bar: 1},
		{Desc: "cold random 4 KiB preads ≥ the best peer at 20 ms", Workload: "random", Phase: "cold 4KiB", Latency: "20ms", Against: peer, Bar: 1},
		{Desc: "cold random 64 KiB preads ≥ the best peer at 20 ms", Workload: "random", Phase: "cold 64KiB", Latency: "20ms", Against: peer, Bar: 1},
		// Issue #9: a second node on a warm shared tier against the origin.
		{Desc: "second node (warm shared tier) cold ImageFolder epoch faster than origin-cold", Workload: "imagefolder",
			Phase: phaseCold, Against: system(subjectName, phaseCold), Bar: 1, System: secondNodeName},
		{Desc: "second node (warm shared tier) cold sequential faster than origin-cold", Workload: "webdataset",
			Phase: "cold", Against: system(subjectName, "cold"), Bar: 1, System: secondNodeName},
	}
}

// TargetResult is one target evaluated at one latency.
type TargetResult struct {
	Target  Target
	Latency string
	Ratio   float64
	Against string
	Met     bool
	Missing bool
}

// evaluate checks every target against the subject's rows.
func evaluate(res *Results, lats []string) []TargetResult {
	var out []TargetResult
	for _, t := range targets() {
		for _, lat := range lats {
			if t.Latency != "" && t.Latency != lat {
				continue
			}
			if !res.ran(t.Workload, lat) {
				continue // not measured at this latency (OneLatency) or not selected
			}
			tr := TargetResult{Target: t, Latency: lat, Missing: true}
			sys := t.System
			if sys == "" {
				sys = subjectName
			}
			r, ok := res.find(func(x Row) bool {
				return x.System == sys && x.Workload == t.Workload && x.Phase == t.Phase && x.Latency == lat
			})
			if ok {
				if base, okB := t.Against(res, r); okB {
					tr.Ratio = ratio(r, base, true)
					tr.Against = fmt.Sprintf("%s %s %s", base.System, formatRate(base.Rate), base.Unit)
					tr.Met = tr.Ratio >= t.Bar
					tr.Missing = false
				}
			}
			out = append(out, tr)
		}
	}
	return out
}

// writeTargets prints the targets table.
func writeTargets(w io.Writer, trs []TargetResult) {
	fmt.Fprintln(w, "### Targets of issues #3, #9, #13 and #15 (measured, not asserted)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| target | latency | measured | against | status |")
	fmt.Fprintln(w, "|---|---|--:|---|---|")
	for _, tr := range trs {
		status, measured := "n/a (no data)", ""
		if !tr.Missing {
			measured = formatRatio(tr.Ratio)
			status = "not met"
			if tr.Met {
				status = "met"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", tr.Target.Desc, tr.Latency, measured, tr.Against, status)
	}
	fmt.Fprintln(w)
}
