package mount

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/stratafs/strata/"

// layers are the packages a tree may not import (README, Development:
// backend ← cache ← prefetch ← fs ← internal ← cmd, and only cmd/strata
// and internal/sidecar import internal/mount).
var layers = []struct {
	tree   string
	denied []string
}{
	{"backend", []string{"cache", "prefetch", "fs", "internal", "cmd"}},
	{"cache", []string{"prefetch", "fs", "internal", "cmd"}},
	{"prefetch", []string{"fs", "internal", "cmd"}},
	{"fs", []string{"internal", "cmd"}},
	{"internal", []string{"cmd"}},
}

func under(pkg, tree string) bool { return pkg == tree || strings.HasPrefix(pkg, tree+"/") }

// TestLayering: no package imports one above it, and internal/mount is
// imported only by the commands that serve mounts. Test files may import
// what they need to build a test.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if base := d.Name(); rel != "." && (strings.HasPrefix(base, ".") || base == "testdata" || base == "bin" || under(rel, "integration")) {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(p, 0)
		if err != nil {
			return nil // no Go files here
		}
		checked++
		for _, imp := range pkg.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			for _, l := range layers {
				if !under(rel, l.tree) {
					continue
				}
				for _, no := range l.denied {
					if under(dep, no) {
						t.Errorf("%s imports %s: %s may not import %s", rel, dep, l.tree, no)
					}
				}
			}
			if dep == "internal/mount" && rel != "cmd/strata" && rel != "internal/sidecar" {
				t.Errorf("%s imports internal/mount: only cmd/strata and internal/sidecar may", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d packages under %s", checked, root)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module root: %v", root, err)
	}
}
