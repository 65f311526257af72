package csi

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The sidecar's memory counts against the workload pod, and a sidecar
// killed for memory takes the pod's data away mid-epoch: the most reported
// failure of the peers' sidecars. So by default the sidecar reads its
// container's memory limit and sizes itself from it.

var errNoLimit = errors.New("csi: no cgroup memory limit")

// CgroupMemoryLimit returns the memory limit of the cgroup this process
// runs in: cgroup v2 memory.max, else v1 memory.limit_in_bytes. It returns
// errNoLimit when there is none ("max", or v1's huge sentinel).
func CgroupMemoryLimit() (int64, error) {
	return cgroupMemoryLimit("/proc/self/cgroup", "/sys/fs/cgroup")
}

func cgroupMemoryLimit(procCgroup, root string) (int64, error) {
	f, err := os.Open(procCgroup)
	if err != nil {
		return 0, fmt.Errorf("csi: %w", err)
	}
	defer f.Close()
	var v2, v1 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case containsField(parts[1], "memory"):
			v1 = parts[2]
		}
	}
	var candidates []string
	if v2 != "" {
		// Inside a container the cgroup namespace usually makes the path
		// "/", so the container's own limit is at the root of the mount.
		candidates = append(candidates, filepath.Join(root, v2, "memory.max"), filepath.Join(root, "memory.max"))
	}
	if v1 != "" {
		candidates = append(candidates, filepath.Join(root, "memory", v1, "memory.limit_in_bytes"),
			filepath.Join(root, "memory", "memory.limit_in_bytes"))
	}
	for _, p := range candidates {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		return parseLimit(strings.TrimSpace(string(b)))
	}
	return 0, errNoLimit
}

func containsField(list, name string) bool {
	for _, f := range strings.Split(list, ",") {
		if f == name {
			return true
		}
	}
	return false
}

// parseLimit reads memory.max or memory.limit_in_bytes.
func parseLimit(s string) (int64, error) {
	if s == "max" || s == "" {
		return 0, errNoLimit
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("csi: memory limit %q: %w", s, err)
	}
	// cgroup v1 reports "unlimited" as a page-rounded huge number.
	if n <= 0 || n >= math.MaxInt64/2 {
		return 0, errNoLimit
	}
	return n, nil
}

// MemoryPlan is how the sidecar spends a memory limit.
type MemoryPlan struct {
	Limit     int64 // the cgroup limit
	GoLimit   int64 // GOMEMLIMIT: the Go runtime collects harder past it
	BufferCap int64 // --memory-limit for all the sidecar's volumes together
}

// PlanMemory keeps the Go heap under 90% of the container limit (the
// rest is the kernel's and the runtime's slack) and gives in-flight fetch
// buffers a quarter of it, at most 1 GiB and at least minBuffers (four
// blocks, the least a mount accepts).
func PlanMemory(limit, minBuffers int64) MemoryPlan {
	p := MemoryPlan{Limit: limit, GoLimit: limit / 10 * 9, BufferCap: limit / 4}
	p.BufferCap = min(p.BufferCap, 1<<30)
	p.BufferCap = max(p.BufferCap, minBuffers)
	return p
}

// IsNoLimit reports whether err means the container has no memory limit.
func IsNoLimit(err error) bool { return errors.Is(err, errNoLimit) }
