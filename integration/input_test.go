package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stratafs/strata/internal/testserver"
)

// TestOddKeys: keys that are not valid POSIX names never break the mount
// and follow the documented rules (the directory wins over a file of the
// same name; invalid names are skipped). fake-gcs-server's memory backend
// stores such keys as given; MinIO refuses or hides most of them.
func TestOddKeys(t *testing.T) {
	requireFUSE(t)
	srv := startFakeGCSMemory(t)
	bucket := srv.newBucket(t)
	long := strings.Repeat("L", 300)
	files := map[string][]byte{
		"kp":            []byte("shadowed by the directory kp/"),
		"kp/child":      []byte("child"),
		"z":             []byte("shadowed, prefix arrives after z-1 and z.2"),
		"z-1":           []byte("z-1"),
		"z.2":           []byte("z.2"),
		"z/in":          []byte("in"),
		"odd/a//b":      []byte("empty segment"),
		"odd/..":        []byte("dot dot"),
		"odd/" + long:   []byte("too long"),
		"odd/sp ace":    []byte("space"),
		"odd/ünï":       []byte("unicode"),
		"odd/dir/":      {},
		"odd/tab\there": []byte("tab"),
	}
	put(t, srv.writer(t, bucket), files)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	for dir, want := range map[string]string{
		"":        "[kp/ odd/ z-1 z.2 z/]",
		"kp":      "[child]",
		"z":       "[in]",
		"odd":     "[a/ dir/ sp ace tab\there ünï]",
		"odd/a":   "[]",
		"odd/dir": "[]",
	} {
		if got := fmt.Sprint(listNames(t, filepath.Join(m.dir, dir))); got != want {
			t.Errorf("ls %q = %s, want %s", dir, got, want)
		}
	}
	for p, want := range map[string]string{"kp/child": "child", "z/in": "in", "odd/sp ace": "space", "odd/ünï": "unicode", "z-1": "z-1"} {
		if b, err := os.ReadFile(filepath.Join(m.dir, p)); err != nil || string(b) != want {
			t.Errorf("read %s: %q %v", p, b, err)
		}
	}
	if st, err := os.Stat(filepath.Join(m.dir, "kp")); err != nil || !st.IsDir() {
		t.Errorf("kp should be a directory: %v", err)
	}
	if !strings.Contains(logTail(m.cacheDir), "not a valid POSIX name") {
		t.Errorf("no warning logged for the skipped keys")
	}
}

// TestBadInput: every mistake gets one line naming the problem, a non-zero
// exit, and nothing mounted.
func TestBadInput(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	bin := testserver.Binary(t, "strata")
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good := srv.source(bucket, "")
	busy := startMount(t, srv, good, "")
	readOnly := readOnlyDir(t)

	cases := []struct {
		name, want string
		source     string
		mnt        string
		env        []string
		args       []string
	}{
		{name: "unknown scheme", source: "ftp://bucket", want: "unknown scheme"},
		{name: "malformed url", source: "s3:/bucket", want: "want s3://"},
		{name: "bad bucket name", source: "s3://Bad_Bucket!", want: "not a valid bucket"},
		{name: "missing bucket", source: "s3://no-such-bucket-here", want: `bucket "no-such-bucket-here" does not exist`},
		{name: "wrong credentials", source: good, env: []string{"AWS_SECRET_ACCESS_KEY=wrong"}, want: "access denied"},
		{name: "unknown profile", source: good, args: []string{"--profile", "no-such-profile"}, want: `profile "no-such-profile": no such profile`},
		{name: "unreachable endpoint", source: good, args: []string{"--endpoint-url", "http://127.0.0.1:1"}, want: "cannot reach"},
		{name: "missing directory", source: "file:///no/such/dir", want: "/no/such/dir does not exist"},
		{name: "mountpoint missing", source: good, mnt: "/nonexistent/mnt", want: "no such file"},
		{name: "mountpoint is a file", source: good, mnt: file, want: "not a directory"},
		{name: "mountpoint busy", source: good, mnt: busy.dir, want: "busy"},
		{name: "cache dir unwritable", source: good, args: []string{"--cache-dir", file + "/sub"}, want: "cache-dir"},
		{name: "cache dir read-only", source: good, args: []string{"--cache-dir", "@RO"}, want: "is not writable"},
		{name: "cache dir under a read-only one", source: good, args: []string{"--cache-dir", "@RO/cache"}, want: "is not writable"},
		{name: "cache dir in use", source: good, args: []string{"--cache-dir", busy.cacheDir}, want: "in use"},
		{name: "bad flag value", source: good, args: []string{"--block-size", "3MiB"}, want: "power of two"},
		{name: "bad ttl", source: good, args: []string{"--metadata-ttl", "soon"}, want: "metadata TTL"},
		{name: "unknown flag", source: good, args: []string{"--no-such-flag"}, want: "unknown flag"},
		// A cache dir the mount would serve itself hangs kernel and daemon
		// (the new binary refuses it before mounting; never run it without).
		{name: "cache dir is the mountpoint", source: good, args: []string{"--cache-dir", "@MNT"}, want: "is the mountpoint itself"},
		{name: "cache dir inside the mountpoint", source: good, args: []string{"--cache-dir", "@MNT/cache"}, want: "inside the mountpoint"},
		{name: "cache dir a symlink to the mountpoint", source: good, args: []string{"--cache-dir", "@LINK/cache"}, want: "inside the mountpoint"},
		{name: "cache dir on another strata mount", source: good, args: []string{"--cache-dir", "@BUSY/cache"}, want: "another Strata mount"},
		{name: "mountpoint not empty", source: good, mnt: "@NONEMPTY", want: "not empty"},
		{name: "unreachable endpoint names the offline mode", source: good, args: []string{"--endpoint-url", "http://127.0.0.1:1"}, want: "--metadata-ttl indefinite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mnt := tc.mnt
			if mnt == "" || mnt == "@NONEMPTY" {
				mnt = t.TempDir()
			}
			if tc.mnt == "@NONEMPTY" {
				if err := os.WriteFile(filepath.Join(mnt, "hidden"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(mnt, link); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"mount", tc.source, mnt, "--cache-dir", t.TempDir()}, srv.flags()...)
			for _, a := range tc.args {
				a = strings.NewReplacer("@MNT", mnt, "@LINK", link, "@BUSY", busy.dir, "@RO", readOnly).Replace(a)
				args = append(args, a)
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(append(os.Environ(), srv.env()...), tc.env...)
			out, err := cmd.CombinedOutput()
			msg := strings.TrimSpace(string(out))
			if err == nil {
				unmountAndWait(t, mnt, "") // before its cache dir is removed under it
				t.Fatalf("mount succeeded; output %q", msg)
			}
			if !strings.Contains(strings.ToLower(msg), strings.ToLower(tc.want)) {
				t.Errorf("error %q does not mention %q", msg, tc.want)
			}
			if strings.Count(msg, "\n") > 0 {
				t.Errorf("error is not one line:\n%s", msg)
			}
			// One line a user reads: each fact said once, no request ids.
			low := strings.ToLower(msg)
			for _, phrase := range []string{"does not exist", "access denied", "check the"} {
				if n := strings.Count(low, phrase); n > 1 {
					t.Errorf("error says %q %d times: %s", phrase, n, msg)
				}
			}
			for _, noise := range []string{"RequestID", "HostID"} {
				if strings.Contains(msg, noise) {
					t.Errorf("error carries the SDK's %s: %s", noise, msg)
				}
			}
			if mnt != busy.dir && isMounted(mnt) {
				t.Errorf("%s is mounted after a failed mount", mnt)
				if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v %s", mnt, err, out)
				}
			}
		})
	}
}

// readOnlyDir is a directory on a read-only mount (a read-only bind mount
// of a fresh directory): root may write anywhere else.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Fatalf("bind mount %s: %v %s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s read-only: %v %s", dir, err, out)
	}
	return dir
}

func isMounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestOddKeysNeverCrash extends TestOddKeys with what it left out: keys of
// 1,000 bytes, a leading slash, "." and a ".." that would climb out of the
// cache dir, a newline, a chain of keys that are also prefixes, a
// placeholder "dir/" with content. The mount stays up, every valid name
// reads back, and cache files are named by hash only.
func TestOddKeysNeverCrash(t *testing.T) {
	requireFUSE(t)
	srv := startFakeGCSMemory(t)
	bucket := srv.newBucket(t)
	seg := strings.Repeat("s", 199)
	files := map[string][]byte{
		seg + "/" + seg + "/" + seg + "/" + seg + "/" + seg: []byte("1,000-byte key"),
		strings.Repeat("x", 1000):                           []byte("1,000-byte name: skipped"),
		"/abs":                                              []byte("leading slash: skipped"),
		"odd/./dot":                                         []byte("dot segment: skipped"),
		"odd/../../../../../../etc/escape":                  []byte("climbs: skipped"),
		"odd/new\nline":                                     []byte("newline"),
		"odd/per%2Fcent":                                    []byte("percent"),
		"odd/back\\slash":                                   []byte("backslash"),
		"odd/😀":                                             []byte("emoji"),
		"odd/full/":                                         []byte("placeholder with bytes"),
		"chain/a":                                           []byte("shadowed by chain/a/"),
		"chain/a/b":                                         []byte("shadowed by chain/a/b/"),
		"chain/a/b/c":                                       []byte("c"),
	}
	put(t, srv.writer(t, bucket), files)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	want := map[string]string{
		seg + "/" + seg + "/" + seg + "/" + seg + "/" + seg: "1,000-byte key",
		"odd/new\nline": "newline", "odd/per%2Fcent": "percent", "odd/back\\slash": "backslash",
		"odd/😀": "emoji", "chain/a/b/c": "c",
	}
	got := map[string]string{}
	for k := range tree(t, m.dir) {
		b, err := os.ReadFile(filepath.Join(m.dir, k))
		if err != nil {
			t.Errorf("read %q: %v", k, err)
		}
		got[k] = string(b)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files seen\n got %q\nwant %q", got, want)
	}
	if st, err := os.Stat(filepath.Join(m.dir, "odd/full")); err != nil || !st.IsDir() {
		t.Errorf("odd/full/ should be a directory: %v", err)
	}
	if syscall.Kill(m.pid, 0) != nil {
		t.Fatal("the mount died")
	}
	hexName := regexp.MustCompile(`^[0-9a-f]{64}$`)
	err := filepath.WalkDir(filepath.Join(m.cacheDir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !hexName.MatchString(d.Name()) {
			t.Errorf("cache file %s is not named by a hash", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/etc/escape"); err == nil {
		t.Error("a key wrote /etc/escape")
	}
}

// TestHugeSparseFileRefused: a file:// source holding a sparse file of
// exabytes (tmpfs allows 2^63-1 bytes) gets EFBIG at open; the mount used
// to die of an out-of-memory fatal error there.
func TestHugeSparseFileRefused(t *testing.T) {
	requireFUSE(t)
	src := &localSource{root: tmpfs(t, 16<<20)}
	bucket := src.newBucket(t)
	put(t, src.writer(t, bucket), map[string][]byte{"small": []byte("small")})
	for name, size := range map[string]int64{"huge": 1 << 62, "max": math.MaxInt64} {
		if err := os.Truncate(filepath.Join(src.root, bucket, name), 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(src.root, bucket, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	m := startMount(t, src, src.source(bucket, ""), "")
	for _, name := range []string{"huge", "max"} {
		if _, err := os.ReadFile(filepath.Join(m.dir, name)); !errors.Is(err, syscall.EFBIG) {
			t.Errorf("read %s: %v (want EFBIG)", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.dir, "small")); err != nil || string(b) != "small" {
		t.Fatalf("small after the huge files: %q %v (the mount died?)", b, err)
	}
}

// TestOddKeysS3: on S3, keys holding characters XML 1.0 cannot carry (a
// control character such as \x01) are listed URL-encoded and decoded, so
// the directory holding them lists and reads like any other; it used to
// fail whole with EIO (the listing's XML could not be parsed).
func TestOddKeysS3(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	files := map[string][]byte{
		"odd/\x01ctl":        []byte("control"),
		"odd/new\nline":      []byte("newline"),
		"odd/percent%41":     []byte("percent"),
		"odd/plus+space x":   []byte("plus and space"),
		"odd/\x02dir/child":  []byte("in an odd directory"),
		"odd/sp ace/child":   []byte("in a spaced directory"),
		"odd/unit\x1fsep.md": []byte("unit separator"),
	}
	put(t, srv.writer(t, bucket), files)
	m := startMount(t, srv, srv.source(bucket, ""), "")
	es, err := os.ReadDir(filepath.Join(m.dir, "odd"))
	if err != nil {
		t.Fatalf("readdir odd: %v", err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	want := []string{"\x01ctl", "\x02dir", "new\nline", "percent%41", "plus+space x", "sp ace", "unit\x1fsep.md"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("readdir odd = %q, want %q", names, want)
	}
	for k, data := range files {
		b, err := os.ReadFile(filepath.Join(m.dir, k))
		if err != nil || string(b) != string(data) {
			t.Errorf("read %q: %q, %v; want %q", k, b, err, data)
		}
	}
}

// TestRefusedMountLeavesNoCacheDir: a background mount (and a warm)
// refused by the bucket check (no such bucket, wrong credentials) left the
// --cache-dir it had created behind, with a LOCK, an index and the log
// of its failure in it. Now the directory is gone again.
func TestRefusedMountLeavesNoCacheDir(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	bin := testserver.Binary(t, "strata")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
	}{
		{"missing bucket", []string{"mount", "s3://no-such-bucket-here", "@MNT"}, nil},
		{"wrong credentials", []string{"mount", srv.source(bucket, ""), "@MNT"}, []string{"AWS_SECRET_ACCESS_KEY=wrong"}},
		{"warm of a missing bucket", []string{"warm", "s3://no-such-bucket-here"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := t.TempDir()
			parent := filepath.Join(t.TempDir(), "new")
			var args []string
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "@MNT", mnt))
			}
			args = append(append(args, "--cache-dir", filepath.Join(parent, "cache")), srv.flags()...)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(append(os.Environ(), srv.env()...), tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				if isMounted(mnt) {
					unmountAndWait(t, mnt, "")
				}
				t.Fatalf("%v succeeded: %s", tc.args, out)
			}
			if _, serr := os.Stat(parent); !errors.Is(serr, fs.ErrNotExist) {
				ls, _ := exec.Command("ls", "-R", parent).CombinedOutput()
				t.Errorf("refused %q (%s) left %s behind:\n%s", tc.args[0], strings.TrimSpace(string(out)), parent, ls)
			}
			if isMounted(mnt) {
				t.Errorf("%s is mounted after a failed mount", mnt)
			}
		})
	}
}

// TestEmptyPrefixWarns: s3://bucket/typo-prefix (no key under it) mounted
// as an empty directory without a word. It still mounts (an empty prefix
// is where checkpoints start), but `strata mount` now says on stderr that
// the prefix holds nothing, and that a file of that name exists when one
// does; a prefix with keys mounts silently.
func TestEmptyPrefixWarns(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"train/a": []byte("a"), "model.pt": []byte("m")})
	bin := testserver.Binary(t, "strata")
	for _, tc := range []struct{ prefix, want string }{
		{"trian", "holds no objects"},
		{"model.pt", "model.pt is an object"},
		{"train", ""},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			mountSays(t, bin, srv, tc.want, srv.source(bucket, tc.prefix))
		})
	}
}

// TestOversizedCacheSizeWarns: a --cache-size larger than the cache disk
// mounts (the cache stops at the disk's last 64 MiB) but says so: the
// default keeps a tenth of the disk free, and a size with a unit typed
// wrong (100TiB for 100GiB) would otherwise fill the disk silently.
func TestOversizedCacheSizeWarns(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t).(*minioServer)
	bucket := srv.newBucket(t)
	put(t, srv.writer(t, bucket), map[string][]byte{"a": []byte("a")})
	bin := testserver.Binary(t, "strata")
	for _, tc := range []struct{ size, want string }{
		{"1000TiB", "--cache-size 1000TiB is more than the cache disk holds"},
		{"64MiB", ""},
	} {
		t.Run(tc.size, func(t *testing.T) {
			mountSays(t, bin, srv, tc.want, srv.source(bucket, ""), "--cache-size", tc.size)
		})
	}
}

// mountSays mounts source with args, unmounts it, and checks what the
// mount printed: nothing when want is "", else one line mentioning want.
func mountSays(t *testing.T, bin string, srv *minioServer, want, source string, args ...string) {
	t.Helper()
	mnt := t.TempDir()
	cmd := exec.Command(bin, append(append([]string{"mount", source, mnt, "--cache-dir", t.TempDir()}, args...), srv.flags()...)...)
	cmd.Env = append(os.Environ(), srv.env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	unmountAndWait(t, mnt, "")
	msg := strings.TrimSpace(string(out))
	if want == "" && msg != "" {
		t.Errorf("mount %s %v printed %q; want nothing", source, args, msg)
	}
	if want != "" && (!strings.Contains(msg, want) || strings.Count(msg, "\n") > 0) {
		t.Errorf("mount %s %v printed %q; want one line mentioning %q", source, args, msg, want)
	}
}
