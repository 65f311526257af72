package csi

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	tests := []struct {
		name    string
		cgroup  string
		files   map[string]string // relative to the cgroup root
		want    int64
		noLimit bool
	}{
		{name: "v2 namespaced", cgroup: "0::/\n", files: map[string]string{"memory.max": "536870912\n"}, want: 512 << 20},
		{name: "v2 nested path", cgroup: "0::/kubepods/pod1/c1\n", files: map[string]string{"kubepods/pod1/c1/memory.max": "1073741824"}, want: 1 << 30},
		{name: "v2 unlimited", cgroup: "0::/\n", files: map[string]string{"memory.max": "max\n"}, noLimit: true},
		{name: "v1", cgroup: "12:cpu,cpuacct:/x\n11:memory:/kubepods/pod1\n", files: map[string]string{
			"memory/kubepods/pod1/memory.limit_in_bytes": "268435456"}, want: 256 << 20},
		{name: "v1 namespaced", cgroup: "11:memory:/\n", files: map[string]string{"memory/memory.limit_in_bytes": "268435456"}, want: 256 << 20},
		{name: "v1 unlimited", cgroup: "11:memory:/\n", files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712"}, noLimit: true},
		{name: "no controller files", cgroup: "0::/\n", noLimit: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			proc := filepath.Join(dir, "cgroup")
			if err := os.WriteFile(proc, []byte(tc.cgroup), 0o644); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(dir, "sys")
			for p, v := range tc.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := cgroupMemoryLimit(proc, root)
			if tc.noLimit {
				if !IsNoLimit(err) {
					t.Fatalf("got %d, %v; want no limit", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestPlanMemory(t *testing.T) {
	tests := []struct {
		limit, goLimit, buffers int64
	}{
		{limit: 1 << 30, goLimit: (1 << 30) / 10 * 9, buffers: 256 << 20},
		{limit: 64 << 30, goLimit: (64 << 30) / 10 * 9, buffers: 1 << 30}, // capped
		{limit: 32 << 20, goLimit: (32 << 20) / 10 * 9, buffers: 8 << 20},
		{limit: 8 << 20, goLimit: (8 << 20) / 10 * 9, buffers: 4 << 20}, // floor: four blocks
	}
	for _, tc := range tests {
		p := PlanMemory(tc.limit, 4<<20)
		if p.GoLimit != tc.goLimit || p.BufferCap != tc.buffers || p.GoLimit >= tc.limit {
			t.Errorf("PlanMemory(%d) = %+v, want go %d buffers %d", tc.limit, p, tc.goLimit, tc.buffers)
		}
	}
}
