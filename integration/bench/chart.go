package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chartFloor is the lowest bottom of the log axis: bars start at the
// decade below the smallest ratio, never lower than this.
const chartFloor = 0.001

// systemColors gives each system a fixed color.
var systemColors = map[string]color.Color{
	"strata": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"rclone": color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"s3fs":   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"get":    color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

var fallbackColors = []color.Color{
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
}

// chartGroup is one cluster of bars: a workload phase.
type chartGroup struct {
	label string
	wl    string
	phase string
}

// chartFamilies groups the workloads into one picture each, in report
// order: what a reader compares side by side.
var chartFamilies = []struct {
	name, title string
	workloads   []string
}{
	{"training", "PyTorch DataLoader and accelerator utilisation", []string{"dataloader", "au-resnet50", "au-unet3d"}},
	{"small-files", "ImageFolder: small files", []string{"imagefolder"}},
	{"sequential", "WebDataset: sequential shards", []string{"webdataset", "webdataset-py"}},
	{"random", "Random reads in a large object", []string{"random"}},
	{"listing", "Listing", []string{"listing", "listing-deep"}},
	{"checkpoint", "Checkpoints", []string{"checkpoint"}},
}

// writeCharts writes chart-FAMILY.png in dir for every workload family
// with rows, and returns the files' names.
func writeCharts(dir string, res *Results, cfg Config) ([]string, error) {
	var names []string
	for _, f := range chartFamilies {
		name := "chart-" + f.name + ".png"
		err := writeChart(filepath.Join(dir, name), f.title, res, cfg, func(wl string) bool { return contains(f.workloads, wl) })
		if errors.Is(err, errNothingToChart) {
			continue
		}
		if err != nil {
			return names, err
		}
		names = append(names, name)
	}
	return names, nil
}

var errNothingToChart = errors.New("bench: nothing to chart")

// writeChart draws one panel per latency: for every phase of the workloads
// keep accepts, each system's rate relative to local disk (log scale;
// local disk is the dashed line at 1).
func writeChart(path, title string, res *Results, cfg Config, keep func(workload string) bool) error {
	var groups []chartGroup
	seen := map[string]bool{}
	for _, s := range sections(res, cfg) {
		for _, r := range s.Rows {
			k := r.Workload + "\x00" + r.Phase
			if keep(r.Workload) && !seen[k] {
				seen[k] = true
				groups = append(groups, chartGroup{label: shortPhase(r.Workload, r.Phase), wl: r.Workload, phase: r.Phase})
			}
		}
	}
	groups = slices.DeleteFunc(groups, func(g chartGroup) bool { return !drawable(res, g) })
	var systems []string // those with a row in the family: no empty legend entries
	for _, s := range allSystems(cfg) {
		if s.Role == RoleLocal || !contains(cfg.Systems, s.Name) {
			continue
		}
		if _, ok := res.find(func(x Row) bool { return x.System == s.Name && keep(x.Workload) }); ok {
			systems = append(systems, s.Name)
		}
	}
	if len(groups) == 0 || len(systems) == 0 {
		return errNothingToChart
	}
	var plots []*plot.Plot
	for _, l := range cfg.Latencies {
		lat := Latency{Delay: l}.Name()
		p, err := latencyPlot(res, title, groups, systems, lat)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	width := vg.Length(math.Max(10, 0.9*float64(len(groups)))) * vg.Inch
	height := vg.Length(4.5*float64(len(plots))) * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
	for i, p := range plots {
		p.Draw(tiles.At(dc, 0, i))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: chart: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: chart: %w", err)
	}
	return f.Close()
}

// drawable reports whether a group has a bar at some latency: a non-zero
// rate beside a non-zero local disk rate.
func drawable(res *Results, g chartGroup) bool {
	for _, r := range res.Rows {
		if r.OK() && r.Rate > 0 && r.Role != RoleLocal && r.Workload == g.wl && r.Phase == g.phase {
			if l, ok := res.Local(r); ok && l.Rate > 0 {
				return true
			}
		}
	}
	return false
}

// latencyPlot builds one panel.
func latencyPlot(res *Results, title string, groups []chartGroup, systems []string, lat string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: rate relative to local disk at %s injected latency (log scale, higher is better)", title, lat)
	p.Y.Label.Text = "× local disk"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	labels := make([]string, len(groups))
	for i, g := range groups {
		labels[i] = g.label
	}
	p.NominalX(labels...)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	p.Legend.Top = true
	p.Legend.Left = true

	barWidth := vg.Length(0.8/float64(len(systems))) * 0.9 * vg.Inch
	ratios := make([][]float64, len(systems)) // 0: no bar
	floor := 0.1
	for si, sys := range systems {
		ratios[si] = make([]float64, len(groups))
		for gi, g := range groups {
			r, ok := res.find(func(x Row) bool {
				return x.System == sys && x.Workload == g.wl && x.Phase == g.phase && x.Latency == lat
			})
			if !ok || r.Rate == 0 { // a zero has no place on a log axis
				continue
			}
			if local, okL := res.Local(r); okL && local.Rate > 0 {
				v := math.Max(r.Rate/local.Rate, chartFloor)
				ratios[si][gi] = v
				floor = math.Min(floor, math.Pow(10, math.Floor(math.Log10(v))))
			}
		}
	}
	p.Y.Min = floor
	base := make(plotter.Values, len(groups))
	for i := range base {
		base[i] = floor
	}
	baseChart, err := plotter.NewBarChart(base, barWidth)
	if err != nil {
		return nil, err
	}
	maxY := 1.0
	for si, sys := range systems {
		vals := make(plotter.Values, len(groups))
		for gi, v := range ratios[si] {
			if v > 0 {
				vals[gi] = math.Max(v, floor) - floor
				maxY = math.Max(maxY, v)
			}
		}
		bc, err := plotter.NewBarChart(vals, barWidth)
		if err != nil {
			return nil, err
		}
		bc.StackOn(baseChart) // bars rise from the floor, not from 0 (log axis)
		bc.LineStyle.Width = 0
		bc.Color = colorOf(sys, si)
		bc.Offset = vg.Length(float64(si)-float64(len(systems)-1)/2) * barWidth
		p.Add(bc)
		p.Legend.Add(sys, bc)
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	one.Color = color.Black
	p.Add(one)
	p.Legend.Add("local disk", one)
	// One decade of headroom keeps the legend clear of the bars.
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(maxY*1.5))+1)
	p.Add(plotter.NewGrid())
	return p, nil
}

func colorOf(sys string, i int) color.Color {
	if c, ok := systemColors[sys]; ok {
		return c
	}
	return fallbackColors[i%len(fallbackColors)]
}

// shortPhase is a compact x-axis label.
func shortPhase(wl, phase string) string {
	short := map[string]string{"imagefolder": "img", "webdataset": "wds", "random": "rnd", "listing": "ls", "listing-deep": "ls-deep", "dataloader": "torch", "webdataset-py": "wds-py", "au-resnet50": "au", "au-unet3d": "au3d"}
	p := strings.NewReplacer(" (epoch 1)", "", " (epoch 2)", "", "restarted mount", "restart",
		"first listing", "first", "after remount", "remount", "KiB", "K").Replace(phase)
	if s, ok := short[wl]; ok {
		wl = s
	}
	return wl + " " + p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
