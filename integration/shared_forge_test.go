package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/shared"
	"github.com/stratafs/strata/internal/testserver"
)

// forgedMark fills every block a forger plants, so the test can look for
// it anywhere on the node's disk.
var forgedMark = []byte("FORGED BY A TENANT WITH WRITE ACCESS TO THE SHARED TIER\n")

// tierEntries lists the tier's shared objects of group g under prefix.
func tierEntries(t *testing.T, tw backend.Backend, prefix string, g int64) []backend.ObjectInfo {
	t.Helper()
	page, err := tw.List(context.Background(), prefix, backend.ListOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []backend.ObjectInfo
	for _, o := range page.Objects {
		if _, _, og, ok := shared.ParseObject(o.Key); ok && og == g {
			out = append(out, o)
		}
	}
	return out
}

func getObject(t *testing.T, tw backend.Backend, o backend.ObjectInfo) []byte {
	t.Helper()
	rc, err := tw.ReadRange(context.Background(), o.Key, "", 0, o.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSharedCacheForgedEntry: a tenant that can write the shared tier but
// does not hold --shared-cache-key-file cannot make a node serve or keep
// its bytes. Node A fills the tier. The forger then replaces two entries:
// one with other bytes under a header made consistent again (length and
// CRC32C recomputed: what any writer who knows the format can do), one
// with another object's genuine entry of the same length (a stale or
// foreign identity). Node B, with an empty local cache, reads the true
// bytes (the two blocks from the origin), counts and logs both refusals,
// and no forged byte reaches its local cache. A block B took from the tier
// and that is then altered on disk is flagged by `strata cache verify`.
func TestSharedCacheForgedEntry(t *testing.T) {
	requireFUSE(t)
	om := &minioServer{testserver.StartMinIO(t)}
	origin := &proxiedMinIO{minioServer: om, proxy: newCountingProxy(t, om.m.Endpoint)}
	tier := testserver.StartMinIO(t)
	bucket, tierBucket := origin.newBucket(t), tier.NewBucket(t)
	files := map[string][]byte{}
	var blocks int64
	for i := range 6 {
		files[fmt.Sprintf("data/f%d.bin", i)] = randData(uint64(500+i), 2<<20+100) // 3 blocks each
		blocks += 3
	}
	put(t, origin.writer(t, bucket), files)
	want := expect(files, "data/")
	source := origin.source(bucket, "data")
	keyFile := filepath.Join(t.TempDir(), "tier.key")
	if err := os.WriteFile(keyFile, []byte("a cluster secret the tenants never see\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sharedFlags := []string{"--shared-cache", "s3://" + tierBucket + "/nodes", "--shared-cache-endpoint-url", tier.Endpoint,
		"--shared-cache-force-path-style", "--shared-cache-region", tier.Region, "--shared-cache-key-file", keyFile,
		"--shared-cache-timeout", "5s", "--shared-cache-write-buffer", "512MiB"}
	epoch := func(name, cacheDir string) shared.Snapshot {
		t.Helper()
		m := startMount(t, origin, source, cacheDir, sharedFlags...)
		if d := diffTrees(want, tree(t, m.dir)); d != "" {
			t.Fatalf("node %s: tree differs from the bucket:\n%s", name, d)
		}
		m.unmount()
		return readShared(t, cacheDir)
	}
	if a := epoch("A", t.TempDir()); a.Writes != blocks || a.WritesDropped != 0 || a.WriteErrors != 0 {
		t.Fatalf("node A did not fill the tier: %+v", a)
	}

	st := &minioServer{tier}
	tw := st.writer(t, tierBucket).(backend.Backend)
	// Forgery 1: block 1 of some file, other bytes, header made consistent.
	g1 := tierEntries(t, tw, "nodes/", 1)
	if len(g1) != len(files) {
		t.Fatalf("tier holds %d entries of group 1, want %d", len(g1), len(files))
	}
	rec := getObject(t, tw, g1[0])
	data := rec[shared.HeaderSize:]
	for i := 0; i < len(data); i += len(forgedMark) {
		copy(data[i:], forgedMark)
	}
	h, err := shared.DecodeHeader(rec[:shared.HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	h.CRC = shared.Checksum(data)
	h.Encode(rec[:shared.HeaderSize])
	put(t, st.writer(t, tierBucket), map[string][]byte{g1[0].Key: rec})
	// Forgery 2: block 0 of one file replaced by block 0 of another.
	g0 := tierEntries(t, tw, "nodes/", 0)
	if len(g0) != len(files) {
		t.Fatalf("tier holds %d entries of group 0, want %d", len(g0), len(files))
	}
	put(t, st.writer(t, tierBucket), map[string][]byte{g0[0].Key: getObject(t, tw, g0[1])})

	origin.proxy.reset()
	cacheDir := t.TempDir()
	b := epoch("B", cacheDir)
	if b.ForgedEntries != 2 || b.BadEntries != 2 || b.MissBlocks != 2 || b.HitBlocks != blocks-2 || origin.proxy.gets.Load() != 2 {
		t.Fatalf("node B past two forged entries: %d origin GETs; %+v", origin.proxy.gets.Load(), b)
	}
	log := logTail(cacheDir)
	if n := strings.Count(log, "refused a shared cache entry"); n != 2 {
		t.Fatalf("node B logged %d refusals, want 2 (one per forged object):\n%s", n, log)
	}
	for _, o := range []backend.ObjectInfo{g1[0], g0[0]} {
		if !strings.Contains(log, o.Key) {
			t.Fatalf("node B's log does not name forged object %s:\n%s", o.Key, log)
		}
	}
	var cached int
	if err := filepath.Walk(filepath.Join(cacheDir, "objects"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		cached++
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, forgedMark) {
			t.Errorf("forged bytes persisted in the local cache: %s", p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if cached != len(files) {
		t.Fatalf("node B's local cache holds %d files, want %d", cached, len(files))
	}

	// B's local cache, filled from the tier, is checked by cache verify:
	// one byte changed on disk in a block B took from the tier (every
	// file's last block: only blocks 0 and 1 were forged) is one bad block.
	var victim string
	if err := filepath.Walk(filepath.Join(cacheDir, "objects"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && victim == "" {
			victim = p
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(victim, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := []byte{0}
	if _, err := f.ReadAt(one, 2<<20+50); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x01
	if _, err := f.WriteAt(one, 2<<20+50); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, errOut, err := runStrata(t, origin, "cache", "verify", "--cache-dir", cacheDir)
	if err != nil || !strings.Contains(out, "1 bad blocks dropped in 1 objects") {
		t.Fatalf("cache verify after altering a block taken from the tier: %v\n%s%s", err, out, errOut)
	}
}
