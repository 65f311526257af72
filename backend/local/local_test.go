package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

func write(t *testing.T, root, key string, data []byte) string {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMissingRoot(t *testing.T) {
	dir := t.TempDir()
	file := write(t, dir, "file", []byte("x"))
	for _, root := range []string{filepath.Join(dir, "nope"), file} {
		b, err := New(root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := b.Check(ctx); !errors.Is(err, backend.ErrNoBucket) {
			t.Errorf("Check(%s) = %v, want ErrNoBucket", root, err)
		}
		if _, err := b.List(ctx, "", backend.ListOptions{}); !errors.Is(err, backend.ErrNoBucket) {
			t.Errorf("List(%s) = %v, want ErrNoBucket", root, err)
		}
		if _, err := b.Stat(ctx, "k"); !errors.Is(err, backend.ErrNoBucket) {
			t.Errorf("Stat under %s = %v, want ErrNoBucket", root, err)
		}
	}
	b, _ := New("file://"+dir, Options{})
	if err := b.Check(context.Background()); err != nil {
		t.Fatalf("Check of an existing root: %v", err)
	}
	if got, want := b.String(), "file://"+dir; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestInvalidKeysStayInside(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	write(t, parent, "secret", []byte("outside"))
	write(t, root, "a/b", []byte("inside"))
	b, _ := New(root, Options{})
	ctx := context.Background()
	for _, key := range []string{"../secret", "/etc/passwd", "a/../../secret", "a/../b", "a//b", "./a/b", "a/b/", "", "a/\x00"} {
		if _, err := b.Stat(ctx, key); !errors.Is(err, backend.ErrNotExist) {
			t.Errorf("Stat(%q) = %v, want ErrNotExist", key, err)
		}
		if _, err := b.ReadRange(ctx, key, "", 0, 1); !errors.Is(err, backend.ErrNotExist) {
			t.Errorf("ReadRange(%q) = %v, want ErrNotExist", key, err)
		}
		_, err := b.Put(ctx, key, strings.NewReader("x"), 1, backend.PutOptions{})
		if !errors.Is(err, ErrInvalidKey) || !errors.Is(err, backend.ErrNotSupported) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Copy(ctx, "a/b", "", key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Copy to %q = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key); err != nil {
			t.Errorf("Delete(%q) = %v, want nil", key, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(parent, "secret")); err != nil || string(got) != "outside" {
		t.Fatalf("file outside the root changed: %q, %v", got, err)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 2 {
		t.Fatalf("something was created beside the root: %v", entries)
	}
}

func TestSymlinks(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	outside := filepath.Join(parent, "outside")
	write(t, outside, "secret", []byte("outside"))
	write(t, root, "real/file", []byte("real"))
	links := map[string]string{
		"out":       outside,                             // absolute, leaves the root
		"outrel":    "../outside",                        // relative, leaves the root
		"outfile":   filepath.Join(outside, "secret"),    // a file outside
		"alias":     "real/file",                         // a file inside
		"dirlink":   "real",                              // a directory inside
		"real/loop": "..",                                // a loop back to the root
		"dangling":  "nowhere",                           // a link to nothing
		"real/up":   filepath.Join("..", "real", "file"), // inside, through ..
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := New(root, Options{})
	ctx := context.Background()
	for _, key := range []string{"out/secret", "outrel/secret", "outfile", "dangling", "real/loop/out/secret"} {
		if _, err := b.Stat(ctx, key); !errors.Is(err, backend.ErrNotExist) {
			t.Errorf("Stat(%q) through a link out of the root = %v, want ErrNotExist", key, err)
		}
		if _, err := b.ReadRange(ctx, key, "", 0, 1); !errors.Is(err, backend.ErrNotExist) {
			t.Errorf("ReadRange(%q) = %v, want ErrNotExist", key, err)
		}
	}
	for _, key := range []string{"alias", "dirlink/file", "real/up"} {
		rc, err := b.ReadRange(ctx, key, "", 0, 4)
		if err != nil {
			t.Fatalf("ReadRange(%q) through a link inside the root: %v", key, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != "real" {
			t.Fatalf("ReadRange(%q) = %q, %v", key, got, err)
		}
	}
	page, err := b.List(ctx, "", backend.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(page); got != "alias|dirlink/|real/" {
		t.Errorf("List(\"\") = %s, want links out of the root hidden", got)
	}
	if p, err := b.List(ctx, "out/", backend.ListOptions{}); err != nil || len(p.Objects)+len(p.Prefixes) > 0 {
		t.Errorf("List(out/) = %+v, %v; want an empty page", p, err)
	}
	// The recursive walk follows inside links once and stops at the loop.
	page, err = b.List(ctx, "", backend.ListOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(page); got != "alias|dirlink/file|dirlink/up|real/file|real/up" {
		t.Errorf("recursive List = %s", got)
	}
	if !escapes(probeEscape(t, root)) {
		t.Fatal("os.Root's error for a path leaving the root no longer says \"path escapes from parent\"; update escapes()")
	}
}

func probeEscape(t *testing.T, root string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Stat("out/secret")
	return err
}

func keysOf(p backend.ListPage) string {
	var k []string
	for _, o := range p.Objects {
		k = append(k, o.Key)
	}
	k = append(k, p.Prefixes...)
	return strings.Join(sortedCopy(k), "|")
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j] < c[j-1]; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
	return c
}

func TestModifiedMidRead(t *testing.T) {
	root := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 256<<10/16*4) // 1 MiB
	b, _ := New(root, Options{})
	ctx := context.Background()
	cases := map[string]func(t *testing.T, p string){
		"InPlaceWrite": func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			must(t, err)
			_, err = f.WriteAt([]byte("XX"), 10)
			must(t, err)
			must(t, f.Close())
		},
		"Append": func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, err = f.Write([]byte("more"))
			must(t, err)
			must(t, f.Close())
		},
		"Truncate": func(t *testing.T, p string) { must(t, os.Truncate(p, 100)) },
	}
	for name, modify := range cases {
		t.Run(name, func(t *testing.T) {
			p := write(t, root, name, data)
			// An old mtime, so that the modification's mtime differs for sure.
			old := time.Now().Add(-time.Hour)
			must(t, os.Chtimes(p, old, old))
			rc, err := b.ReadRange(ctx, name, "", 0, int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			first := make([]byte, 64<<10)
			if _, err := io.ReadFull(rc, first); err != nil {
				t.Fatal(err)
			}
			modify(t, p)
			rest, err := io.ReadAll(rc)
			if !errors.Is(err, backend.ErrVersionChanged) {
				t.Fatalf("read after %s: %d more bytes, error %v; want ErrVersionChanged", name, len(rest), err)
			}
			if len(first)+len(rest) >= len(data) {
				t.Fatalf("the whole range was handed out (%d bytes) before the change was detected", len(first)+len(rest))
			}
		})
	}
	t.Run("ReplacedByRename", func(t *testing.T) {
		// The open descriptor keeps reading the version asked for: no error.
		p := write(t, root, "renamed", data)
		rc, err := b.ReadRange(ctx, "renamed", "", 0, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		write(t, root, "renamed.new", []byte("new"))
		if err := os.Rename(p+".new", p); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read of a file replaced by rename: %d bytes, %v", len(got), err)
		}
	})
}
