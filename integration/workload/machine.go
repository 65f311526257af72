package workload

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine describes where a benchmark ran.
type Machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Kernel string `json:"kernel"`
	Memory string `json:"memory"`
	// Disk describes the block device and filesystem holding the work dir.
	Disk string `json:"disk"`
	// PageReporting is the kernel's free page reporting to the hypervisor
	// when the machine was described (PageReporting).
	PageReporting string `json:"page_reporting,omitempty"`
}

// String is a one-line description.
func (m Machine) String() string {
	s := fmt.Sprintf("%s, %d cores, %s RAM, Linux %s, disk: %s", m.CPU, m.Cores, m.Memory, m.Kernel, m.Disk)
	if m.PageReporting != "" && m.PageReporting != "none" {
		s += ", free page reporting " + m.PageReporting
	}
	return s
}

// DescribeMachine gathers CPU model, cores, kernel, memory and the disk
// under dir.
func DescribeMachine(dir string) Machine {
	m := Machine{CPU: "unknown CPU", Cores: runtime.NumCPU(), Memory: "?", Disk: "?"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.Memory = FormatSize(int64(si.Totalram) * int64(si.Unit))
	}
	m.Disk = describeDisk(dir)
	m.PageReporting = PageReporting()
	return m
}

// describeDisk names the device, its type and the filesystem holding dir.
func describeDisk(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "?"
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	fstype, source := mountOf(major, minor)
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	target, err := filepath.EvalSymlinks(sys)
	if err != nil {
		return fmt.Sprintf("%s on %s", fstype, source)
	}
	dev := filepath.Base(target)
	// A partition's queue settings live on its parent disk.
	disk := target
	if _, err := os.Stat(filepath.Join(target, "partition")); err == nil {
		disk = filepath.Dir(target)
	}
	kind := "non-rotational"
	if readTrim(filepath.Join(disk, "queue", "rotational")) == "1" {
		kind = "rotational"
	}
	model := readTrim(filepath.Join(disk, "device", "model"))
	if strings.HasPrefix(filepath.Base(disk), "vd") {
		// A virtio disk's flag says nothing about the host's storage.
		model = strings.TrimSpace("virtio " + model)
		kind = "backing storage unknown"
	}
	var size string
	if s := readTrim(filepath.Join(disk, "size")); s != "" {
		if sectors, err := strconv.ParseInt(s, 10, 64); err == nil {
			size = FormatSize(sectors*512) + " "
		}
	}
	return strings.TrimSpace(fmt.Sprintf("%s (%s%s %s), %s", dev, size, model, kind, fstype))
}

func mountOf(major, minor uint32) (fstype, source string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "?", "?"
	}
	defer f.Close()
	want := fmt.Sprintf("%d:%d", major, minor)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[2] != want {
			continue
		}
		for i, x := range fields {
			if x == "-" && i+2 < len(fields) {
				return fields[i+1], fields[i+2]
			}
		}
	}
	return "?", "?"
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// LoadAverage returns the 1-, 5- and 15-minute load averages as
// /proc/loadavg prints them ("?" if unreadable): other work on the machine
// skews every figure, and reports should say how busy it was.
func LoadAverage() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
