package workload

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is one reading of the machine's aggregate "cpu" line of
// /proc/stat, in clock ticks summed over every core. Two readings around
// a run say how busy the whole machine was meanwhile (the reader, the
// mount's daemon, MinIO and the latency proxy alike): a run whose
// machine was busy all along was bound by the CPU, not by the wire.
type CPUTimes struct {
	Busy  uint64 // user, nice, system, irq, softirq, steal
	Total uint64 // Busy plus idle and iowait
}

// ReadCPUTimes reads /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if t, ok, err := parseCPULine(sc.Text()); ok || err != nil {
			return t, err
		}
	}
	if err := sc.Err(); err != nil {
		return CPUTimes{}, err
	}
	return CPUTimes{}, fmt.Errorf("/proc/stat: no aggregate cpu line")
}

// parseCPULine parses "cpu  user nice system idle iowait irq softirq
// steal ..." (guest time is already counted in user); ok is false for
// any other line.
func parseCPULine(line string) (CPUTimes, bool, error) {
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return CPUTimes{}, false, nil
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(fields[i+1], 10, 64)
		if err != nil {
			return CPUTimes{}, true, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		v[i] = n
	}
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return CPUTimes{Busy: busy, Total: busy + v[3] + v[4]}, true, nil
}

// BusyShare is the share of every core's time that was busy from t to
// later (0 to 1), or -1 when no tick passed between the readings.
func (t CPUTimes) BusyShare(later CPUTimes) float64 {
	if later.Total <= t.Total {
		return -1
	}
	return float64(later.Busy-t.Busy) / float64(later.Total-t.Total)
}
