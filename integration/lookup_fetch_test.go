package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLookupFetchOpensSmallFilesWithoutAGet: files opened by path in
// directories nobody listed (a sampler over a file list) cost one request
// each on S3: the lookup's GET of the first --lookup-fetch bytes brings a
// small file whole, and its open and read need no request. A bigger file
// gets its ranged GET at open; --lookup-fetch 0 sends HEADs; a backend
// without the call (GCS) is asked as before. Every byte read is checked.
func TestLookupFetchOpensSmallFilesWithoutAGet(t *testing.T) {
	requireFUSE(t)
	servers(t, func(t *testing.T, srv server) {
		bucket := srv.newBucket(t)
		files := map[string][]byte{}
		for i := range 20 {
			data := bytes.Repeat([]byte{byte(i)}, 1000+i*997)
			files[fmt.Sprintf("p/d%d/f%02d", i%4, i)] = data
		}
		big := bytes.Repeat([]byte("big"), 200_000) // 600,000 bytes: over 256 KiB
		files["p/d0/big"] = big
		put(t, srv.writer(t, bucket), files)
		_, s3 := srv.(*minioServer)
		for _, fetch := range []string{"256KiB", "0"} {
			t.Run("lookup-fetch="+fetch, func(t *testing.T) {
				addr := metricsAddr(t)
				m := startMount(t, srv, srv.source(bucket, ""), "", "--metrics-addr", addr,
					"--lookup-fetch", fetch, "--dir-prefetch=false", "--list-prefetch=false")
				for k, want := range files {
					got, err := os.ReadFile(filepath.Join(m.dir, k))
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("%s: %d bytes, %v (want %d bytes)", k, len(got), err, len(want))
					}
				}
				fams := scrape(t, addr)
				heads := metric(fams, "strata_backend_requests_total", map[string]string{"op": "read_head", "status": "ok"})
				gets := metric(fams, "strata_backend_requests_total", map[string]string{"op": "read"})
				stats := metric(fams, "strata_backend_requests_total", map[string]string{"op": "stat"})
				t.Logf("read_head %v, read %v, stat %v", heads, gets, stats)
				switch {
				case s3 && fetch != "0":
					if heads != float64(len(files)) || gets != 1 || stats != 0 {
						t.Fatalf("%d files opened by path: %v lookup GETs, %v GETs at open, %v HEADs; want %d, 1 (the big file), 0",
							len(files), heads, gets, stats, len(files))
					}
				default:
					if heads != 0 || gets != float64(len(files)) {
						t.Fatalf("%v lookup GETs and %v GETs at open, want 0 and %d", heads, gets, len(files))
					}
				}
			})
		}
	})
}
