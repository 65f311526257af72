package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/posixtest"
	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/local"
	"github.com/stratafs/strata/internal/testserver"
)

// go-fuse's posixtest suite on Strata mounts.
//
// Read-only subset (TestPosixReadOnly, --read-only mount, fixtures put in
// the bucket or directory first): every posixtest test creates its files
// through the mount, so only ReadDirConsistency runs unmodified; the read
// halves of DirSeek, DirectIO, FdLeak, FileBasic, FileLarge,
// LseekEnxioCheck, LseekHoleSeeksToEOF, OpenAt, ParallelFileOpen and
// ReadDirBasic run as ports below against the same fixtures, and every
// mutation is EROFS.
//
// Write subset (TestPosixWriteSubset, writable mount, the write path of
// #5): the unmodified tests that pass. Not applicable to an object store:
// Link, LinkUnlinkRename, NlinkZero (no hard links), SymlinkReadlink,
// SetattrSymlink, OpenSymlinkRace (no symlinks), XAttr, XAttrLarge (no
// xattrs), Fallocate, FallocateKeepSize, FcntlFlockLocksFile (no
// fallocate or cross-process locks), FileBasic (modes come from
// --file-mode), RenameOverwrite* (an inode is a key and version: rename
// makes a new one), FstatDeleted.

// localSource serves file:// sources from a temporary directory.
type localSource struct{ root string }

func (s *localSource) name() string { return "file" }
func (s *localSource) newBucket(t *testing.T) string {
	if err := os.MkdirAll(filepath.Join(s.root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	return "data"
}
func (s *localSource) source(b, p string) string { return "file://" + filepath.Join(s.root, b, p) }
func (s *localSource) flags() []string           { return nil }
func (s *localSource) env() []string             { return nil }
func (s *localSource) oddKeys() bool             { return false }
func (s *localSource) stop(t *testing.T)         { t.Fatal("a directory cannot stop") }
func (s *localSource) restart(t *testing.T)      { t.Fatal("a directory cannot restart") }
func (s *localSource) writer(t *testing.T, b string) backend.Writer {
	be, err := local.New(filepath.Join(s.root, b), local.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// posixFixtures are the files the posixtest tests would create.
func posixFixtures() map[string][]byte {
	large := make([]byte, 128<<10+123)
	for i := range large {
		large[i] = byte(i * 7 / 3)
	}
	f := map[string][]byte{
		"FileBasic/file": []byte("hello world"), "FileLarge/file": large, "FdLeak/file": []byte("hello world"),
		"ParallelFileOpen/file": []byte("content"), "Lseek/file.bin": bytes.Repeat([]byte("abcxyz\n"), 1024),
		"DirectIO/file.txt": bytes.Repeat([]byte("bye"), 4096), "OpenAt/dir1/file1": []byte("openat"),
		"ReadDirConsistency/a": {}, "ReadDirConsistency/b": {}, "ReadDirConsistency/c/d": {},
	}
	for i := range 110 {
		f[fmt.Sprintf("ReadDirBasic/file%036x", i)] = []byte("hello")
	}
	for i := 1; i <= 168; i++ {
		f[fmt.Sprintf("DirSeek/ttt/%d", i)] = nil
	}
	return f
}

func readAllDirents(t *testing.T, fd int) []fuse.DirEntry {
	t.Helper()
	var out []fuse.DirEntry
	buf := make([]byte, 4096)
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for todo := buf[:n]; len(todo) > 0; {
			var de fuse.DirEntry
			todo = todo[de.Parse(todo):]
			out = append(out, de)
		}
	}
}

// readOnlyPosix are the read halves of posixtest tests; mnt is the mount
// root, fixtures from posixFixtures.
var readOnlyPosix = map[string]func(t *testing.T, mnt string){
	"ReadDirConsistency": func(t *testing.T, mnt string) { posixtest.ReadDirConsistency(t, mnt+"/ReadDirConsistency") },
	"FileBasic": func(t *testing.T, mnt string) {
		fn := mnt + "/FileBasic/file"
		if got, err := os.ReadFile(fn); err != nil || string(got) != "hello world" {
			t.Fatalf("ReadFile: %q %v", got, err)
		}
		f, err := os.Open(fn)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || fi.Size() != 11 || uint32(fuse.ToStatT(fi).Mode) != fuse.S_IFREG|0o755 {
			t.Errorf("Fstat: %v size %d mode %o", err, fi.Size(), fuse.ToStatT(fi).Mode)
		}
	},
	"FileLarge": func(t *testing.T, mnt string) {
		content := posixFixtures()["FileLarge/file"]
		f, err := os.Open(mnt + "/FileLarge/file")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, len(content)+1000)
		if n, err := io.ReadFull(f, buf); err != io.ErrUnexpectedEOF || !bytes.Equal(buf[:n], content) {
			t.Fatalf("short read at EOF: %d, %v", n, err)
		}
		off := 4096 + 7
		buf = make([]byte, 64<<10+5)
		if n, err := f.ReadAt(buf, int64(off)); err != nil || !bytes.Equal(buf, content[off:off+len(buf)]) {
			t.Errorf("ReadAt: %d, %v", n, err)
		}
	},
	"FdLeak": func(t *testing.T, mnt string) {
		fds := func() int { es, _ := os.ReadDir("/proc/self/fd"); return len(es) }
		before := fds()
		for range 100 {
			if _, err := os.ReadFile(mnt + "/FdLeak/file"); err != nil {
				t.Fatal(err)
			}
		}
		if n := fds() - before; n > 15 {
			t.Errorf("%d more open descriptors after 100 ReadFile", n)
		}
	},
	"ParallelFileOpen": func(t *testing.T, mnt string) {
		fn := mnt + "/ParallelFileOpen/file"
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, err := os.ReadFile(fn)
				if err != nil || string(b) != "content" {
					t.Errorf("parallel open: %q %v", b, err)
				}
			}()
		}
		wg.Wait()
		if _, err := os.OpenFile(fn, os.O_RDWR, 0); !errors.Is(err, syscall.EROFS) {
			t.Errorf("O_RDWR on a read-only mount: %v", err)
		}
	},
	"ReadDirBasic": func(t *testing.T, mnt string) {
		es, err := os.ReadDir(mnt + "/ReadDirBasic")
		if err != nil || len(es) != 110 {
			t.Fatalf("%d entries, %v", len(es), err)
		}
		for i, e := range es {
			if want := fmt.Sprintf("file%036x", i); e.Name() != want {
				t.Fatalf("entry %d is %q, want %q", i, e.Name(), want)
			}
		}
	},
	"DirSeek": func(t *testing.T, mnt string) { // xfstests generic/257
		fd, err := syscall.Open(mnt+"/DirSeek/ttt", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		result := readAllDirents(t, fd)
		if len(result) < 168 {
			t.Fatalf("%d entries, want 168 (and . ..)", len(result))
		}
		buf := make([]byte, 4096)
		for i := len(result) - 1; i >= 0; i-- {
			var seekTo int64
			if i > 0 {
				seekTo = int64(result[i-1].Off)
			}
			if _, err := unix.Seek(fd, seekTo, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			n, err := unix.ReadDirent(fd, buf)
			if err != nil || n == 0 {
				t.Fatalf("getdents after seek to entry %d: %d %v", i, n, err)
			}
			var de fuse.DirEntry
			de.Parse(buf)
			if !reflect.DeepEqual(de, result[i]) {
				t.Errorf("entry %d: got %v, want %v", i, de, result[i])
			}
		}
	},
	"Lseek": func(t *testing.T, mnt string) { // LseekHoleSeeksToEOF, LseekEnxioCheck
		size := int64(7 * 1024)
		fd, err := syscall.Open(mnt+"/Lseek/file.bin", syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		if off, err := unix.Seek(fd, size/2, unix.SEEK_HOLE); err != nil || off != size {
			t.Errorf("SEEK_HOLE from the middle: %d, %v (want %d)", off, err, size)
		}
		for _, c := range []struct{ off, whence int64 }{{size, unix.SEEK_DATA}, {size + 1, unix.SEEK_DATA}, {size + 1, unix.SEEK_HOLE}} {
			if _, err := unix.Seek(fd, c.off, int(c.whence)); err != nil && !errors.Is(err, syscall.ENXIO) {
				t.Errorf("seek %d whence %d: %v, want ENXIO", c.off, c.whence, err)
			}
		}
	},
	"DirectIO": func(t *testing.T, mnt string) {
		fd, err := syscall.Open(mnt+"/DirectIO/file.txt", syscall.O_DIRECT|syscall.O_RDONLY, 0)
		if err == syscall.EINVAL {
			testserver.SkipOrFail(t, "the mount refuses O_DIRECT: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		got := bytes.Repeat([]byte("xxx"), 4096)
		// A read waiting on a fetch is interruptible: the Go runtime's
		// SIGURG reaches the daemon as a FUSE INTERRUPT, and the read
		// answers EINTR, which os.File.Read (and Python) retry. So does
		// this raw read.
		n, err := syscall.Read(fd, got)
		for err == syscall.EINTR {
			n, err = syscall.Read(fd, got)
		}
		if err != nil || n != len(got) || !bytes.Equal(got, posixFixtures()["DirectIO/file.txt"]) {
			t.Errorf("O_DIRECT read: %d, %v", n, err)
		}
	},
	"OpenAt": func(t *testing.T, mnt string) {
		dirfd, err := syscall.Open(mnt+"/OpenAt/dir1", syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(dirfd)
		fd, err := unix.Openat(dirfd, "file1", syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		b := make([]byte, 16)
		if n, _ := syscall.Read(fd, b); string(b[:n]) != "openat" {
			t.Errorf("openat read %q", b[:n])
		}
		if _, err := unix.Openat(dirfd, "new", syscall.O_CREAT|syscall.O_WRONLY, 0o644); !errors.Is(err, syscall.EROFS) {
			t.Errorf("openat O_CREAT on a read-only mount: %v", err)
		}
	},
}

// mutations must all fail with EROFS on a read-only mount.
var mutations = map[string]func(mnt string) error{
	"create":   func(m string) error { return os.WriteFile(m+"/new", nil, 0o644) },
	"append":   func(m string) error { _, err := os.OpenFile(m+"/FdLeak/file", os.O_APPEND|os.O_WRONLY, 0); return err },
	"truncate": func(m string) error { return os.Truncate(m+"/FdLeak/file", 0) },
	"mkdir":    func(m string) error { return os.Mkdir(m+"/d", 0o755) },
	"rmdir":    func(m string) error { return os.Remove(m + "/OpenAt/dir1") },
	"unlink":   func(m string) error { return os.Remove(m + "/FdLeak/file") },
	"rename":   func(m string) error { return os.Rename(m+"/FdLeak/file", m+"/moved") },
	"link":     func(m string) error { return os.Link(m+"/FdLeak/file", m+"/hard") },
	"symlink":  func(m string) error { return os.Symlink("x", m+"/sym") },
	"chmod":    func(m string) error { return os.Chmod(m+"/FdLeak/file", 0o600) },
	"setxattr": func(m string) error { return unix.Setxattr(m+"/FdLeak/file", "user.x", []byte("1"), 0) },
	"utimes":   func(m string) error { return unix.Utimes(m+"/FdLeak/file", []unix.Timeval{{Sec: 1}, {Sec: 2}}) },
}

func TestPosixReadOnly(t *testing.T) {
	requireFUSE(t)
	for _, s := range []struct {
		name  string
		start func(*testing.T) server
	}{{"file", func(t *testing.T) server { return &localSource{t.TempDir()} }}, {"minio", startMinIO}} {
		t.Run(s.name, func(t *testing.T) {
			srv := s.start(t)
			bucket := srv.newBucket(t)
			putParallel(t, srv.writer(t, bucket), posixFixtures())
			m := startMount(t, srv, srv.source(bucket, ""), "", "--read-only", "--file-mode", "0755")
			for name, fn := range readOnlyPosix {
				t.Run(name, func(t *testing.T) { fn(t, m.dir) })
			}
			for name, fn := range mutations {
				if err := fn(m.dir); !errors.Is(err, syscall.EROFS) {
					t.Errorf("%s on a read-only mount: %v (want EROFS)", name, err)
				}
			}
		})
	}
}

// TestPosixWriteSubset runs, unmodified, the posixtest tests the write
// path passes, each in its own directory of one writable mount.
func TestPosixWriteSubset(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	m := startMount(t, srv, srv.source(srv.newBucket(t), ""), "", "--metadata-ttl", "0")
	for _, name := range strings.Fields(`AppendWrite DirSeek DirectIO FcntlFlockSetLk FdLeak FileLarge
		LseekEnxioCheck LseekHoleSeeksToEOF MkdirRmdir OpenAt ParallelFileOpen ReadDirBasic
		ReadDirConsistency RenameOpenDir TruncateFile TruncateNoFile`) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(m.dir, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			posixtest.All[name](t, dir)
		})
	}
}

// TestCloseNotInterruptedBySignals: close() of a written file (which
// uploads it) succeeds while the writer receives signals that do not kill
// it; the Go runtime sends itself SIGURG to preempt goroutines, so this
// is every Go program. It used to fail with EINTR.
func TestCloseNotInterruptedBySignals(t *testing.T) {
	requireFUSE(t)
	srv := startMinIO(t)
	bucket := srv.newBucket(t)
	m := startMount(t, srv, srv.source(bucket, ""), "", "--upload", "sync")
	be := srv.writer(t, bucket).(backend.Backend)
	for round := range 4 {
		data := randData(uint64(round), 32<<20)
		name := fmt.Sprintf("ckpt-%d.bin", round)
		f, err := os.Create(filepath.Join(m.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		err = closeUnderSignals(f)
		if err != nil {
			t.Fatalf("round %d: close with signals arriving: %v", round, err)
		}
		rc, err := be.ReadRange(context.Background(), name, "", 0, int64(len(data)))
		if err != nil {
			t.Fatalf("round %d: %s not in the bucket after close: %v", round, name, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d: bucket holds %d bytes (%v), not what was written", round, len(got), err)
		}
	}
}

// closeUnderSignals closes f on a locked thread that gets SIGURGs while
// close waits for the upload.
func closeUnderSignals(f *os.File) error {
	_, err := underSignals(func() (int, error) { return 0, f.Close() })
	return err
}
