package index

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func openTemp(t *testing.T, dir string) *Index {
	t.Helper()
	ix, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestObjectsAndBlocksPersist(t *testing.T) {
	dir := t.TempDir()
	ix := openTemp(t, dir)
	id := IDFor("s3://b", "k", "v1")
	rec := ObjectRecord{Source: "s3://b", Key: "k", Version: "v1", Size: 10, BlockSize: 4}
	if err := ix.PutObject(id, rec); err != nil {
		t.Fatal(err)
	}
	for i, bi := range []BlockInfo{{CRC: 1, Len: 4}, {CRC: 2, Len: 4}, {CRC: 3, Len: 2}} {
		if err := ix.MarkBlock(id, int64(i), bi); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	ix = openTemp(t, dir)
	defer ix.Close()
	got, ok, err := ix.GetObject(id)
	if err != nil || !ok || got != rec {
		t.Fatalf("GetObject after reopen: %+v %v %v", got, ok, err)
	}
	var idxs []int64
	if err := ix.Blocks(id, func(i int64, bi BlockInfo) error { idxs = append(idxs, i); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(idxs) != "[0 1 2]" {
		t.Fatalf("blocks %v", idxs)
	}
	var usage int64
	if err := ix.ScanBlockUsage(func(_ ID, n, b int64) error { usage += b; return nil }); err != nil || usage != 10 {
		t.Fatalf("usage %d %v", usage, err)
	}
	if err := ix.DropBlocks(id, []int64{1}); err != nil {
		t.Fatal(err)
	}
	freed, err := ix.DeleteObject(id)
	if err != nil || freed != 6 {
		t.Fatalf("DeleteObject freed %d, %v (want 6)", freed, err)
	}
	if _, ok, _ := ix.GetObject(id); ok {
		t.Fatal("object still there")
	}
}

func TestFormatCheck(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	defer ix.Close()
	f := Format{Version: FormatVersion, BlockSize: 1 << 20}
	if err := ix.CheckFormat(f); err != nil {
		t.Fatal(err)
	}
	if err := ix.CheckFormat(f); err != nil {
		t.Fatal(err)
	}
	f.BlockSize = 4 << 20
	if err := ix.CheckFormat(f); !errors.Is(err, ErrFormat) {
		t.Fatalf("want ErrFormat, got %v", err)
	}
}

func TestReplaceListingDiffs(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	defer ix.Close()
	tag := TagFor("s3://b")
	mk := func(names ...string) []NamedEntry {
		var es []NamedEntry
		for i, n := range names {
			es = append(es, NamedEntry{Name: n, Entry: EntryRecord{Kind: KindFile, Size: int64(i)}})
		}
		return es
	}
	if err := ix.ReplaceListing(tag, "d/", DirRecord{FetchedAt: 1, Complete: true, Entries: 3}, mk("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if err := ix.ReplaceListing(tag, "d/", DirRecord{FetchedAt: 2, Complete: true, Entries: 2}, mk("b", "x")); err != nil {
		t.Fatal(err)
	}
	// A sibling whose name extends the prefix must not leak in.
	if err := ix.ReplaceListing(tag, "d/e/", DirRecord{FetchedAt: 2, Complete: true, Entries: 1}, mk("z")); err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := ix.ScanListing(tag, "d/", func(n string, e EntryRecord) error { names = append(names, fmt.Sprint(n, e.Size)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names) != "[b0 x1]" {
		t.Fatalf("listing %v", names)
	}
	hdr, ok, err := ix.GetDir(tag, "d/")
	if err != nil || !ok || hdr.FetchedAt != 2 || !hdr.Complete {
		t.Fatalf("header %+v %v %v", hdr, ok, err)
	}
	if e, ok, _ := ix.GetEntry(tag, "d/", "x"); !ok || e.Size != 1 {
		t.Fatalf("GetEntry x: %+v %v", e, ok)
	}
	if err := ix.DeleteListing(tag, "d/"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ix.GetDir(tag, "d/"); ok {
		t.Fatal("header survived DeleteListing")
	}
	if _, ok, _ := ix.GetEntry(tag, "d/e/", "z"); !ok {
		t.Fatal("DeleteListing removed a sibling directory")
	}
}

func TestStatsAndVersions(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	defer ix.Close()
	tag := TagFor("src")
	if _, ok, _ := ix.GetStat(tag, "k"); ok {
		t.Fatal("unexpected stat")
	}
	want := EntryRecord{Kind: KindAbsent, FetchedAt: 7}
	if err := ix.PutStat(tag, "k", want); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := ix.GetStat(tag, "k"); !ok || got != want {
		t.Fatalf("stat %+v", got)
	}
	id := IDFor("src", "k", "v")
	if err := ix.SetCurrentVersion(tag, "k", id); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := ix.CurrentVersion(tag, "k"); !ok || got != id {
		t.Fatal("current version")
	}
	if IDFor("a", "bc", "") == IDFor("ab", "c", "") {
		t.Fatal("IDFor is ambiguous across field boundaries")
	}
}

func TestJournalPersistsInOrder(t *testing.T) {
	dir := t.TempDir()
	ix := openTemp(t, dir)
	var seqs []uint64
	for _, k := range []string{"a", "b", "c"} {
		seq, err := ix.AppendUpload(UploadRecord{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	if err := ix.DeleteUpload(seqs[1]); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	ix = openTemp(t, dir)
	defer ix.Close()
	var keys []string
	if err := ix.ScanUploads(func(_ uint64, r UploadRecord, err error) error { keys = append(keys, r.Key); return err }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != "[a c]" {
		t.Fatalf("journal after reopen: %v", keys)
	}
	if seq, _ := ix.AppendUpload(UploadRecord{Key: "d"}); seq <= seqs[2] {
		t.Fatalf("sequence went backwards after reopen: %d <= %d", seq, seqs[2])
	}
}

// ScanObjectsPage walks every record exactly once, a page at a time, in
// the order of a whole scan.
func TestScanObjectsPage(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	for i := range 7 {
		k := string(rune('a' + i))
		if err := ix.PutObject(IDFor("s", k, "v"), ObjectRecord{Source: "s", Key: k, Version: "v", Size: 1, BlockSize: 4096}); err != nil {
			t.Fatal(err)
		}
	}
	var all, paged []ID
	if err := ix.ScanObjects(func(id ID, _ ObjectRecord, _ error) error { all = append(all, id); return nil }); err != nil {
		t.Fatal(err)
	}
	var after *ID
	for pages := 0; ; pages++ {
		var page []ID
		if err := ix.ScanObjectsPage(after, 3, func(id ID, _ ObjectRecord, _ error) error { page = append(page, id); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 || pages > 10 {
			break
		}
		paged = append(paged, page...)
		after = &page[len(page)-1]
	}
	if len(all) != 7 || !slices.Equal(all, paged) {
		t.Fatalf("whole scan %d records, paged %d: %v vs %v", len(all), len(paged), all, paged)
	}
}
