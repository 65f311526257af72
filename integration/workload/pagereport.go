package workload

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// pageReportingOrder is the knob of the kernel's free page reporting
// (mm/page_reporting.c): on a VM with a virtio balloon that offers it, the
// guest hands blocks of free memory of 2^order pages back to the
// hypervisor. Memory used again after that faults on the host: on the
// bench's VM a 1 MiB write into fresh page cache took a median 3.1 ms
// instead of 0.35, and the checkpoint rows ran 1.2-2.8x slower or not
// depending on what the run before had freed (docs/benchmarks.md).
const pageReportingOrder = "/sys/module/page_reporting/parameters/page_reporting_order"

// maxPageOrder is the largest buddy order on x86-64 and arm64 with 4 KiB
// pages (MAX_PAGE_ORDER, 10): no free block is larger, so an order above
// it reports nothing.
const maxPageOrder = 10

// PageReporting describes the machine's free page reporting: "none" when
// the kernel has none, else "on (order N)" or "off (order N)".
func PageReporting() string {
	order, err := readPageReportingOrder()
	switch {
	case err != nil:
		return "none"
	case order > maxPageOrder:
		return fmt.Sprintf("off (order %d)", order)
	default:
		return fmt.Sprintf("on (order %d)", order)
	}
}

func readPageReportingOrder() (int, error) {
	b, err := os.ReadFile(pageReportingOrder)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// HoldOffPageReporting stops free page reporting (if the machine has it
// on) for the length of a run and returns what restores it, with a note
// for the report; restore is nil and the note empty when there was
// nothing to do. It needs root.
func HoldOffPageReporting() (restore func() error, note string, err error) {
	order, err := readPageReportingOrder()
	if err != nil || order > maxPageOrder {
		return nil, "", nil
	}
	off := strconv.Itoa(maxPageOrder + 1)
	if err := os.WriteFile(pageReportingOrder, []byte(off), 0); err != nil {
		return nil, "", fmt.Errorf("holding off free page reporting: %w", err)
	}
	restore = func() error { return os.WriteFile(pageReportingOrder, []byte(strconv.Itoa(order)), 0) }
	return restore, fmt.Sprintf("the VM's free page reporting to its host held off during the run (%s: %d -> %s, restored after; -page-reporting keep leaves it on)",
		pageReportingOrder, order, off), nil
}
