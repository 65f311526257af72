package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// readmeFlags reads README's "Mount flags" section: each table row whose
// default is written as code (`60s`), and the shared-cache flags listed
// with their default in parentheses. A row may name several flags with as
// many defaults (`--file-mode`, `--dir-mode` | `0644`, `0755`).
func readmeFlags(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Mount flags")
	j := strings.Index(s[i+1:], "\n## ")
	if i < 0 || j < 0 {
		t.Fatal("README has no Mount flags section")
	}
	section := s[i : i+1+j]
	flagRe := regexp.MustCompile("`(?:-\\w, )?--([a-z-]+)")
	codeRe := regexp.MustCompile("^`([^`]*)`")
	out := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "--") {
			continue
		}
		names := flagRe.FindAllStringSubmatch(cells[1], -1)
		var defs []string
		for _, d := range strings.Split(strings.TrimSpace(cells[2]), ", ") {
			if m := codeRe.FindStringSubmatch(d); m != nil {
				defs = append(defs, m[1])
			}
		}
		if len(defs) == 0 || len(defs) != len(names) {
			continue // no literal default ("off", "the mounting user") or prose
		}
		for k, n := range names {
			out[n[1]] = defs[k]
		}
	}
	for _, m := range regexp.MustCompile("`--(shared-cache-[a-z-]+)` \\(([^)]+)\\)").FindAllStringSubmatch(section, -1) {
		if !strings.Contains(m[2], " ") {
			out[m[1]] = m[2]
		}
	}
	return out
}

// TestREADMEDefaults: every default README's flag tables state is the
// flag's default, which comes from config.Defaults (the one table).
func TestREADMEDefaults(t *testing.T) {
	flags := mountCmd().Flags()
	documented := readmeFlags(t)
	if len(documented) < 25 {
		t.Fatalf("read %d defaults from README (%v): the parser lost the tables", len(documented), documented)
	}
	for name, want := range documented {
		f := flags.Lookup(name)
		if f == nil {
			t.Errorf("README documents --%s, which strata mount does not have", name)
			continue
		}
		if f.DefValue == "" {
			continue // worked out when mounting (the cache dir, the log file)
		}
		// The README's spelling goes through the flag's own parser: 60s
		// is the 1m0s a TTL prints.
		as := mountCmd().Flags()
		if err := as.Set(name, want); err != nil {
			t.Errorf("--%s: README's default %q does not parse: %v", name, want, err)
			continue
		}
		if got := as.Lookup(name).Value.String(); got != f.DefValue {
			t.Errorf("--%s: README says the default is %q (%s), the flag's is %q", name, want, got, f.DefValue)
		}
	}
}
