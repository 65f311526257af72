package index

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestScanListingFromPages pages a listing the way cache/meta's reader
// does: each page starts after the last name of the one before.
func TestScanListingFromPages(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	defer ix.Close()
	tag := TagFor("s3://b")
	var es []NamedEntry
	for _, n := range []string{"a", "b", "b0", "c", "d", "e", "f"} {
		es = append(es, NamedEntry{Name: n, Entry: EntryRecord{Kind: KindFile}})
	}
	if err := ix.ReplaceListing(tag, "d/", DirRecord{Complete: true, Entries: int64(len(es))}, es); err != nil {
		t.Fatal(err)
	}
	// "d/x" sorts after every entry of "d/": a scan must stop at its prefix.
	if err := ix.ReplaceListing(tag, "d/x/", DirRecord{Complete: true, Entries: 1}, es[:1]); err != nil {
		t.Fatal(err)
	}
	page := func(after string, limit int) string {
		var names []string
		err := ix.ScanListingFrom(tag, "d/", after, limit, func(n string, _ EntryRecord) error { names = append(names, n); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(names, ",")
	}
	for _, tc := range []struct {
		after string
		limit int
		want  string
	}{
		{"", 3, "a,b,b0"},
		{"b", 3, "b0,c,d"}, // after "b" excludes "b" and includes "b0"
		{"b0", 3, "c,d,e"},
		{"e", 3, "f"},
		{"f", 3, ""},
		{"zz", 3, ""},
		{"", 100, "a,b,b0,c,d,e,f"},
		{"", 0, ""},
		{"a", -1, ""},
	} {
		if got := page(tc.after, tc.limit); got != tc.want {
			t.Errorf("after %q limit %d: %q, want %q", tc.after, tc.limit, got, tc.want)
		}
	}
	boom := errors.New("boom")
	n := 0
	err := ix.ScanListing(tag, "d/", func(string, EntryRecord) error { n++; return boom })
	if !errors.Is(err, boom) || n != 1 {
		t.Fatalf("an error from fn ends the scan and comes back wrapped: %v after %d calls", err, n)
	}
}

func TestDeleteStatsUnder(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	defer ix.Close()
	tag, other := TagFor("a"), TagFor("b")
	for _, k := range []string{"d/1", "d/2", "d/e/3", "d", "dd/4"} {
		if err := ix.PutStat(tag, k, EntryRecord{Kind: KindFile}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.PutStat(other, "d/1", EntryRecord{Kind: KindFile}); err != nil {
		t.Fatal(err)
	}
	if err := ix.DeleteStatsUnder(tag, "d/"); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{"d/1": false, "d/2": false, "d/e/3": false, "d": true, "dd/4": true} {
		if _, ok, _ := ix.GetStat(tag, k); ok != want {
			t.Errorf("stat %q present %v, want %v", k, ok, want)
		}
	}
	if _, ok, _ := ix.GetStat(other, "d/1"); !ok {
		t.Error("DeleteStatsUnder reached another source")
	}
}

func TestScanObjectsAndBlockUsage(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	defer ix.Close()
	want := map[ID]int64{}
	for i := range 3 {
		id := IDFor("s", fmt.Sprint("k", i), "v")
		if err := ix.PutObject(id, ObjectRecord{Source: "s", Key: fmt.Sprint("k", i), Size: 8, BlockSize: 4}); err != nil {
			t.Fatal(err)
		}
		for b := range i {
			if err := ix.MarkBlock(id, int64(b), BlockInfo{Len: 4}); err != nil {
				t.Fatal(err)
			}
		}
		if i > 0 {
			want[id] = int64(4 * i)
		}
	}
	objs := 0
	if err := ix.ScanObjects(func(_ ID, rec ObjectRecord, err error) error {
		if err != nil || rec.Size != 8 {
			t.Errorf("record %+v %v", rec, err)
		}
		objs++
		return nil
	}); err != nil || objs != 3 {
		t.Fatalf("ScanObjects: %d records, %v", objs, err)
	}
	got := map[ID]int64{}
	if err := ix.ScanBlockUsage(func(id ID, n, b int64) error {
		if b != 4*n {
			t.Errorf("%d blocks, %d bytes", n, b)
		}
		got[id] = b
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("block usage %v, want %v", got, want)
	}
}
