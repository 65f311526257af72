package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentAppendersKeepEveryLine: four processes append lines to
// one log file at once, each opening it with O_APPEND for every line
// (training workers logging to a shared file, a shell's `echo ... >>
// log`). Every append must succeed and every line be in the file, through
// the mount and in the bucket. Before: with --upload sync three of the
// four writers got EIO at open() and 23 lines of 80 were left; with
// --upload async every call succeeded and 2 lines were silently lost.
func TestConcurrentAppendersKeepEveryLine(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.newBucket(t)
			w := srv.writer(t, bucket)
			m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", mode)
			log := filepath.Join(m.dir, "log.txt")
			const writers, lines = 4, 20
			var wg sync.WaitGroup
			errs := make([]string, writers)
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Python reports a failed close (the shell's >> does not).
					script := fmt.Sprintf(`import sys
for j in range(1, %d):
    with open(sys.argv[1], "a") as f:
        f.write("writer %d line %%d\n" %% j)
`, lines+1, i)
					if out, err := exec.Command("python3", "-c", script, log).CombinedOutput(); err != nil {
						errs[i] = fmt.Sprintf("writer %d: %v: %s", i, err, out)
					}
				}()
			}
			wg.Wait()
			for _, e := range errs {
				if e != "" {
					t.Error(e)
				}
			}
			var want []string
			for i := range writers {
				for j := 1; j <= lines; j++ {
					want = append(want, fmt.Sprintf("writer %d line %d", i, j))
				}
			}
			sort.Strings(want)
			check := func(where string, data []byte) {
				got := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
				sort.Strings(got)
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s: %d lines of %d (%d distinct)", where, len(got), len(want), len(distinct(got)))
				}
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			check("through the mount", data)
			if _, errOut, err := runStrata(t, srv, "sync", m.dir); err != nil {
				t.Fatalf("strata sync: %v\n%s", err, errOut)
			}
			if got, _, err := bucketSHA(t, w, "log.txt"); err != nil || got != sha(data) {
				t.Errorf("in the bucket: sha %s, %v; want the mount's %s", got, err, sha(data))
			}
		})
	}
}

func distinct(ss []string) map[string]bool {
	out := map[string]bool{}
	for _, s := range ss {
		out[s] = true
	}
	return out
}
