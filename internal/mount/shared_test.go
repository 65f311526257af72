package mount

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSharedKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if k, err := readSharedKey(""); k != nil || err != nil {
		t.Fatalf("no key file: %q, %v", k, err)
	}
	if k, err := readSharedKey(write("ok", "  c2VjcmV0IGtleSBvZiAzMiBieXRlcw==\n")); err != nil || string(k) != "c2VjcmV0IGtleSBvZiAzMiBieXRlcw==" {
		t.Fatalf("key with surrounding space: %q, %v", k, err)
	}
	if _, err := readSharedKey(write("short", "tooshort\n")); err == nil || !strings.Contains(err.Error(), "want at least 16") {
		t.Fatalf("short key: %v", err)
	}
	if _, err := readSharedKey(write("blank", "\n\n")); err == nil {
		t.Fatal("blank key file accepted")
	}
	if _, err := readSharedKey(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "--shared-cache-key-file") {
		t.Fatalf("missing key file: %v", err)
	}
}
