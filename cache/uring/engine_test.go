package uring

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// genBatch makes a batch of reads and writes of mixed sizes at random
// offsets, some past EOF, none overlapping (overlapping ops of one batch
// have no defined order). Reads that could see a write of the same batch
// extend the file are dropped, so the pre-batch model predicts every read.
func genBatch(r *rand.Rand, m model, fd int, limit int64) []Op {
	n := 1 + r.IntN(40)
	var ops []Op
	type span struct{ a, b int64 }
	var used []span
	size := int64(len(m))
	extends := false
	for range n {
		l := sizes[r.IntN(len(sizes))]
		var off int64
		switch r.IntN(4) {
		case 0: // block aligned
			off = r.Int64N(limit/(1<<20)) << 20
		case 1: // around EOF
			off = max(0, size-int64(r.IntN(2*l+1)))
		default:
			off = r.Int64N(limit)
		}
		s := span{off, off + int64(l)}
		clash := false
		for _, u := range used {
			if s.a < u.b && u.a < s.b {
				clash = true
			}
		}
		if clash {
			continue
		}
		used = append(used, s)
		op := Op{Fd: fd, Off: off, Write: r.IntN(2) == 0}
		if op.Write {
			op.Buf = randBytes(r, l)
			extends = extends || s.b > size
		} else {
			op.Buf = make([]byte, l)
		}
		ops = append(ops, op)
	}
	if extends {
		kept := ops[:0]
		for _, op := range ops {
			if op.Write || op.Off+int64(len(op.Buf)) <= size {
				kept = append(kept, op)
			}
		}
		ops = kept
	}
	return ops
}

// sparseStart makes a sparse 4 MiB file with two written islands.
func sparseStart(t *testing.T, r *rand.Rand, fd int) model {
	m := make(model, 4<<20)
	if err := unix.Ftruncate(fd, int64(len(m))); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{100 << 10, 3<<20 + 12345} {
		p := randBytes(r, 200<<10)
		if _, err := unix.Pwrite(fd, p, off); err != nil {
			t.Fatal(err)
		}
		m.write(off, p)
	}
	return m
}

// TestRandomBatches runs random batches on every engine configuration and
// checks every op and the final file against a model.
func TestRandomBatches(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		r := rand.New(rand.NewPCG(1, 2))
		fd, path := openTemp(t, "f")
		m := sparseStart(t, r, fd)
		for round := range 60 {
			ops := genBatch(r, m, fd, 24<<20)
			e.Do(ops)
			for i := range ops {
				op := &ops[i]
				if op.Write {
					if op.Err != nil || op.N != len(op.Buf) {
						t.Fatalf("round %d: write off %d len %d: N=%d err=%v", round, op.Off, len(op.Buf), op.N, op.Err)
					}
				} else if err := checkRead(m, op); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			for _, op := range ops {
				if op.Write {
					m.write(op.Off, op.Buf)
				}
			}
		}
		checkFile(t, path, m)
	})
}

// TestEnginesAgree runs the same random batches, including failing ops,
// through pread and io_uring in lockstep on two files and compares every
// result with each other.
func TestEnginesAgree(t *testing.T) {
	pe := newEngine(t, KindPread, DefaultOptions())
	ue := newEngine(t, KindUring, DefaultOptions())
	r := rand.New(rand.NewPCG(3, 4))
	fdP, pathP := openTemp(t, "p")
	fdU, pathU := openTemp(t, "u")
	seed := r.Uint64()
	m := sparseStart(t, rand.New(rand.NewPCG(seed, 0)), fdP)
	sparseStart(t, rand.New(rand.NewPCG(seed, 0)), fdU)
	rdonly, err := unix.Open(pathP, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rdonly)
	for round := range 40 {
		opsP := genBatch(r, m, fdP, 16<<20)
		if round%4 == 0 { // failures: a write to a read-only fd, a negative offset
			opsP = append(opsP, Op{Fd: rdonly, Buf: []byte("x"), Write: true}, Op{Fd: fdP, Off: -1, Buf: make([]byte, 8)})
		}
		opsU := make([]Op, len(opsP))
		for i, op := range opsP {
			op.Buf = bytes.Clone(op.Buf)
			if op.Fd == fdP {
				op.Fd = fdU
			}
			opsU[i] = op
		}
		pe.Do(opsP)
		ue.Do(opsU)
		for i := range opsP {
			p, u := &opsP[i], &opsU[i]
			if p.N != u.N || !bytes.Equal(p.Buf, u.Buf) || (p.Err == nil) != (u.Err == nil) {
				t.Fatalf("round %d op %d (write=%v off %d len %d): pread N=%d err=%v, uring N=%d err=%v",
					round, i, p.Write, p.Off, len(p.Buf), p.N, p.Err, u.N, u.Err)
			}
			var ep, eu syscall.Errno
			if p.Err != nil && (!errors.As(p.Err, &ep) || !errors.As(u.Err, &eu) || ep != eu) {
				t.Fatalf("round %d op %d: errnos differ: pread %v, uring %v", round, i, p.Err, u.Err)
			}
			if p.Fd == fdP && p.Err == nil && p.Write {
				m.write(p.Off, p.Buf)
			}
		}
	}
	checkFile(t, pathP, m)
	checkFile(t, pathU, m)
}

// TestEOFAndHoles pins the read semantics: holes read as zeros, a read
// across EOF stops short with no error, a read at or past EOF returns 0.
func TestEOFAndHoles(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		fd, _ := openTemp(t, "f")
		if err := unix.Ftruncate(fd, 3<<20); err != nil {
			t.Fatal(err)
		}
		data := []byte("island")
		if n, err := e.WriteAt(fd, data, 1<<20); n != len(data) || err != nil {
			t.Fatalf("WriteAt: %d %v", n, err)
		}
		tests := []struct {
			name string
			off  int64
			n    int
			want []byte
		}{
			{"hole", 4096, 100, make([]byte, 100)},
			{"island", 1 << 20, 6, data},
			{"hole and island", 1<<20 - 2, 10, append(append([]byte{0, 0}, data...), 0, 0)},
			{"across EOF", 3<<20 - 5, 4096, make([]byte, 5)},
			{"at EOF", 3 << 20, 4096, nil},
			{"past EOF", 5 << 20, 1 << 20, nil},
			{"empty buffer", 0, 0, nil},
		}
		for _, tt := range tests {
			buf := make([]byte, tt.n)
			n, err := e.ReadAt(fd, buf, tt.off)
			if err != nil || !bytes.Equal(buf[:n], tt.want) {
				t.Errorf("%s: ReadAt(off %d, %d) = %d, %v; want %d bytes %q", tt.name, tt.off, tt.n, n, err, len(tt.want), tt.want)
			}
		}
	})
}

// TestFdErrors: a bad op fails alone, with an errno errors.Is can match,
// and the good ops of the same batch still succeed.
func TestFdErrors(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		fd, path := openTemp(t, "f")
		if _, err := unix.Pwrite(fd, []byte("0123456789"), 0); err != nil {
			t.Fatal(err)
		}
		wronly, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(wronly)
		dir, err := unix.Open(t.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dir)
		ops := []Op{
			{Fd: fd, Buf: make([]byte, 4)},
			{Fd: wronly, Buf: make([]byte, 4)},         // read on a write-only fd
			{Fd: 1 << 20, Buf: make([]byte, 4)},        // not an open fd
			{Fd: dir, Buf: make([]byte, 4)},            // a directory
			{Fd: fd, Off: -4096, Buf: make([]byte, 4)}, // negative offset
			{Fd: 1 << 40, Buf: make([]byte, 4)},        // fd beyond int32
			{Fd: fd, Off: 4, Buf: make([]byte, 4)},
		}
		e.Do(ops)
		want := []error{nil, syscall.EBADF, syscall.EBADF, syscall.EISDIR, syscall.EINVAL, syscall.EBADF, nil}
		for i, w := range want {
			if w == nil && (ops[i].Err != nil || ops[i].N != 4) || w != nil && !errors.Is(ops[i].Err, w) {
				t.Errorf("op %d: N=%d err=%v, want %v", i, ops[i].N, ops[i].Err, w)
			}
		}
		if string(ops[0].Buf)+string(ops[6].Buf) != "01234567" {
			t.Errorf("good ops read %q %q", ops[0].Buf, ops[6].Buf)
		}
		if _, err := e.ReadAt(wronly, make([]byte, 1), 0); !errors.Is(err, syscall.EBADF) {
			t.Errorf("ReadAt on write-only fd: %v, want EBADF", err)
		}
		if _, err := e.WriteAt(1<<20, []byte("x"), 0); !errors.Is(err, syscall.EBADF) {
			t.Errorf("WriteAt on closed fd: %v, want EBADF", err)
		}
	})
}

func TestParseKindAndNew(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Kind
		ok   bool
	}{{"auto", KindAuto, true}, {"uring", KindUring, true}, {"pread", KindPread, true}, {"", "", false}, {"io_uring", "", false}} {
		k, err := ParseKind(tt.in)
		if k != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseKind(%q) = %q, %v", tt.in, k, err)
		}
	}
	if _, err := New("mmap", DefaultOptions()); !errors.Is(err, ErrBadKind) {
		t.Errorf("New(mmap): %v, want ErrBadKind", err)
	}
	e := newEngine(t, KindAuto, Options{})
	if e.Name() != string(autoKind) {
		t.Errorf("auto resolved to %q, want %q", e.Name(), autoKind)
	}
	if p := newEngine(t, KindPread, Options{}); p.Name() != "pread" {
		t.Errorf("pread engine named %q", p.Name())
	}
}
