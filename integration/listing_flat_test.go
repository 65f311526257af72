package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestListPrefetchWalksATreeInFewRequests: walking a tree of 60 leaf
// directories (readdir of every directory, stat of every entry, as ls -lR
// or an ImageFolder scan does) shows every key and nothing else, and with
// --list-prefetch (the default) costs far fewer LIST requests than one per
// directory, which is what it costs with the prefetch off.
func TestListPrefetchWalksATreeInFewRequests(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		files := map[string][]byte{}
		for d := range 12 {
			for s := range 5 {
				for k := range 5 {
					files[fmt.Sprintf("tree/d%02d/s%d/k%d", d, s, k)] = make([]byte, (d+s+k)%7)
				}
			}
		}
		// Raw key order is not name order; a "dir/" marker is an empty
		// directory (fake-gcs-server lists no prefix for a lone marker, with
		// or without the prefetch, so only on MinIO).
		files["tree/x-1/k"] = []byte("a")
		files["tree/x/k"] = []byte("bb")
		if _, ok := srv.(*minioServer); ok {
			files["tree/m/"] = nil
		}
		putParallel(t, srv.writer(t, bucket), files)

		wantFiles := map[string]int64{}
		wantDirs := map[string]bool{}
		for k, v := range files {
			p := strings.TrimSuffix(k, "/")
			if p == k {
				wantFiles[p] = int64(len(v))
			} else {
				wantDirs[p] = true
			}
			for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
				wantDirs[d] = true
			}
		}
		dirs := len(wantDirs) + 1 // and the root

		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprint("list-prefetch=", on), func(t *testing.T) {
				addr := metricsAddr(t)
				m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr, fmt.Sprint("--list-prefetch=", on))
				gotFiles, gotDirs := map[string]int64{}, map[string]bool{}
				walkStat(t, m.dir, "", gotFiles, gotDirs)
				if d := diffSizes(wantFiles, gotFiles); d != "" {
					t.Errorf("files seen by the walk differ:\n%s", d)
				}
				if !mapsEqualKeys(wantDirs, gotDirs) {
					t.Errorf("directories seen by the walk: %v, want %v", sortedKeys(gotDirs), sortedKeys(wantDirs))
				}
				lists := metric(scrape(t, addr), "strata_backend_requests_total", map[string]string{"op": "list"})
				t.Logf("%v LIST requests for %d directories", lists, dirs)
				// The root and tree/ (the split's root) listed by the walk,
				// and tree/'s one flat page: a walk that gets ahead of the
				// flat listing waits for it rather than racing it.
				if on && lists > 3 {
					t.Errorf("walking %d directories sent %v LIST requests, want 3", dirs, lists)
				}
				if !on && lists < float64(dirs) {
					t.Errorf("with the prefetch off, %d directories took only %v LIST requests", dirs, lists)
				}
			})
		}
	})
}

// walkStat reads dir recursively and stats every entry, recording files
// (relative path -> size) and directories.
func walkStat(t *testing.T, root, rel string, files map[string]int64, dirs map[string]bool) {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		p := filepath.Join(rel, e.Name())
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if st.IsDir() != e.IsDir() {
			t.Errorf("%s: readdir says dir=%v, stat says dir=%v", p, e.IsDir(), st.IsDir())
		}
		if st.IsDir() {
			dirs[p] = true
			walkStat(t, root, p, files, dirs)
		} else {
			files[p] = st.Size()
		}
	}
}

func diffSizes(want, got map[string]int64) string {
	var b strings.Builder
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			fmt.Fprintf(&b, "  %s: want %d bytes, got %d (present %v)\n", k, v, g, ok)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "  %s: not in the bucket\n", k)
		}
	}
	return b.String()
}

func mapsEqualKeys(a, b map[string]bool) bool {
	return slices.Equal(sortedKeys(a), sortedKeys(b))
}
