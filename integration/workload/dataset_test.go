package workload

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func tinyDataset(seed uint64) Dataset {
	return Dataset{
		Seed:        seed,
		ImageFolder: &ImageFolderSpec{Prefix: "img", Files: 20, Dirs: 3, Size: 4096, Jitter: 0.25},
		WebDataset:  &WebDatasetSpec{Prefix: "wds", Shards: 2, ShardSize: 64 << 10, SampleSize: 5000},
		BigFiles:    &BigFileSpec{Prefix: "big", Count: 1, Size: 100_000},
		Listing:     &ListingSpec{Prefix: "list", Keys: 50, Dirs: 2, SubDirs: 3, Size: 16},
	}
}

func TestGenerateDeterministic(t *testing.T) {
	ctx := context.Background()
	d := tinyDataset(42)
	a, err := Generate(ctx, t.TempDir(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(ctx, t.TempDir(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two generations of one dataset differ")
	}
	if got, want := len(a.Files), 20+2+1+50; got != want {
		t.Fatalf("%d files, want %d", got, want)
	}
	c, err := Generate(ctx, t.TempDir(), tinyDataset(43), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Files[0].SHA256 == c.Files[0].SHA256 {
		t.Error("another seed gave the same bytes")
	}
	if len(a.Under("img")) != 20 || len(a.Under("list")) != 50 || len(a.Under("im")) != 0 {
		t.Error("Under selects by whole path segments")
	}
}

func TestGenerateSizesAndLayout(t *testing.T) {
	dir := t.TempDir()
	m, err := Generate(context.Background(), dir, tinyDataset(7), nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, f := range m.Under("img") {
		if f.Size < 3072 || f.Size > 5120 {
			t.Errorf("%s: size %d outside 4096±25%%", f.Path, f.Size)
		}
		dirs[filepath.Dir(f.Path)] = true
	}
	if len(dirs) != 3 {
		t.Errorf("%d class dirs, want 3", len(dirs))
	}
	for _, f := range m.Under("wds") {
		if f.Size != 64<<10 {
			t.Errorf("%s: size %d, want exactly the shard size", f.Path, f.Size)
		}
		checkTar(t, filepath.Join(dir, f.Path))
	}
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(dir, f.Path))
		if err != nil || st.Size() != f.Size {
			t.Fatalf("%s: %v, size mismatch", f.Path, err)
		}
	}
}

// checkTar reads a shard as a tar and expects .jpg/.cls sample pairs.
func checkTar(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if n%2 == 0 && filepath.Ext(h.Name) != ".jpg" || n%2 == 1 && filepath.Ext(h.Name) != ".cls" {
			t.Fatalf("%s: member %d is %s", p, n, h.Name)
		}
		n++
	}
	if n < 2 {
		t.Fatalf("%s: %d members", p, n)
	}
}

func TestGenerateReuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := tinyDataset(1)
	if _, err := Generate(ctx, dir, d, nil); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "big", "big-00.bin")
	old, _ := os.Stat(marker)
	if _, err := Generate(ctx, dir, d, nil); err != nil {
		t.Fatal(err)
	}
	now, _ := os.Stat(marker)
	if !now.ModTime().Equal(old.ModTime()) {
		t.Error("an intact tree was regenerated")
	}
	// A damaged tree is regenerated.
	if err := os.Truncate(marker, 10); err != nil {
		t.Fatal(err)
	}
	m, err := Generate(ctx, dir, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(marker); st.Size() != m.Under("big")[0].Size {
		t.Error("a damaged tree was not regenerated")
	}
}

func TestPlanRejectsBadSpecs(t *testing.T) {
	bad := []Dataset{
		{ImageFolder: &ImageFolderSpec{Prefix: "", Files: 1, Dirs: 1, Size: 1}},
		{ImageFolder: &ImageFolderSpec{Prefix: "../x", Files: 1, Dirs: 1, Size: 1}},
		{ImageFolder: &ImageFolderSpec{Prefix: "a", Files: 1, Dirs: 1, Size: 1}, BigFiles: &BigFileSpec{Prefix: "a/", Count: 1, Size: 1}},
		{WebDataset: &WebDatasetSpec{Prefix: "w", Shards: 1, ShardSize: 100, SampleSize: 100}},
		{Listing: &ListingSpec{Prefix: "l", Keys: 1}},
	}
	for i, d := range bad {
		if _, err := d.Plan(); err == nil {
			t.Errorf("dataset %d: no error", i)
		}
	}
}
