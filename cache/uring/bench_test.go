package uring

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Benchmarks of the cache's real I/O, pread against io_uring:
//
//   - ColdFill: fetched 1 MiB blocks written into many sparse cache files,
//     buffered and O_DIRECT, in Do batches of 1, 8 and 32 (what
//     cache.Object.WriteBlocks issues).
//   - WarmRead: 4 KiB, 128 KiB and 1 MiB reads at random offsets of cache
//     files in the page cache: qd1 is one reader calling ReadAt; batch32
//     is one Do of 32 reads; par16 is 16 goroutines calling ReadAt, the
//     FUSE readers of a mount serving a DataLoader.
//
// Each line reports MB/s and ops/s; the parent benchmark then logs a
// table of uring/pread ratios.

var engineKinds = []Kind{KindPread, KindUring}

type benchResult struct{ mbps, opsps float64 }

// ratioTable collects sub-benchmark results keyed by "case/engine".
type ratioTable struct {
	mu    sync.Mutex
	res   map[string]benchResult
	order []string
}

func (rt *ratioTable) record(b *testing.B, key string, bytesPerOp, opsPerIter int) {
	sec := b.Elapsed().Seconds()
	if sec == 0 {
		return
	}
	ops := float64(b.N*opsPerIter) / sec
	b.ReportMetric(ops, "ops/s")
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.res == nil {
		rt.res = map[string]benchResult{}
	}
	c := key[:strings.LastIndexByte(key, '/')]
	if !slices.Contains(rt.order, c) {
		rt.order = append(rt.order, c)
	}
	rt.res[key] = benchResult{ops * float64(bytesPerOp) / 1e6, ops}
}

func (rt *ratioTable) log(b *testing.B) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-28s %12s %12s %12s %12s %7s\n", "case", "pread MB/s", "uring MB/s", "pread ops/s", "uring ops/s", "u/p")
	for _, c := range rt.order {
		p, okP := rt.res[c+"/pread"]
		u, okU := rt.res[c+"/uring"]
		if okP && okU {
			fmt.Fprintf(&sb, "%-28s %12.0f %12.0f %12.0f %12.0f %7.2f\n", c, p.mbps, u.mbps, p.opsps, u.opsps, u.opsps/p.opsps)
		}
	}
	fmt.Print(sb.String()) // b.Log of a parent benchmark is not printed
}

func benchEngine(b *testing.B, kind Kind) Engine {
	e, err := New(kind, DefaultOptions())
	if errors.Is(err, ErrUnavailable) {
		b.Skipf("io_uring unavailable: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

const (
	fillFiles       = 16
	fillBlocksPer   = 64 // 64 MiB per file, 1 GiB of sparse space in all
	fillBlock       = 1 << 20
	warmFiles       = 8
	warmFileSize    = 32 << 20
	warmParallelism = 8 // × GOMAXPROCS goroutines
)

func BenchmarkColdFill(b *testing.B) {
	var rt ratioTable
	for _, mode := range []string{"buffered", "direct"} {
		for _, batch := range []int{1, 8, 32} {
			for _, kind := range engineKinds {
				name := fmt.Sprintf("%s/batch=%d/%s", mode, batch, kind)
				b.Run(name, func(b *testing.B) {
					coldFill(b, kind, mode == "direct", batch)
					rt.record(b, name, fillBlock, batch)
				})
			}
		}
	}
	rt.log(b)
}

func coldFill(b *testing.B, kind Kind, direct bool, batch int) {
	e := benchEngine(b, kind)
	dir := b.TempDir()
	fds := make([]int, fillFiles)   // where the blocks are written
	trunc := make([]int, fillFiles) // buffered fds, to empty the files
	for i := range fds {
		path := filepath.Join(dir, fmt.Sprint(i))
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		fds[i], trunc[i] = fd, fd
		if direct {
			if fds[i], err = OpenDirect(path); errors.Is(err, ErrDirectUnsupported) {
				b.Skipf("O_DIRECT: %v", err)
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Cleanup(func() {
		for i := range fds {
			unix.Close(trunc[i])
			if direct {
				unix.Close(fds[i])
			}
		}
	})
	r := rand.New(rand.NewPCG(1, uint64(batch)))
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = AllocAligned(fillBlock)
		copy(bufs[i], randBytes(r, fillBlock))
	}
	ops := make([]Op, batch)
	const slots = fillFiles * fillBlocksPer
	next := 0
	b.SetBytes(int64(batch * fillBlock))
	b.ResetTimer()
	for range b.N {
		if next+batch > slots { // the space is full: empty the files, untimed
			b.StopTimer()
			for _, fd := range trunc {
				if err := unix.Ftruncate(fd, 0); err != nil {
					b.Fatal(err)
				}
			}
			next = 0
			b.StartTimer()
		}
		for k := range ops {
			s := next + k
			// Spread consecutive blocks over the files, and scatter each
			// file's blocks so the files stay sparse while filling.
			file, blk := s%fillFiles, (s/fillFiles*37)%fillBlocksPer
			ops[k] = Op{Fd: fds[file], Off: int64(blk) * fillBlock, Buf: bufs[k], Write: true}
		}
		next += batch
		e.Do(ops)
		for k := range ops {
			if ops[k].Err != nil {
				b.Fatal(ops[k].Err)
			}
		}
	}
	b.StopTimer()
	for _, fd := range trunc {
		if err := unix.Ftruncate(fd, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWarmRead(b *testing.B) {
	dir := b.TempDir()
	fds := make([]int, warmFiles)
	data := randBytes(rand.New(rand.NewPCG(2, 2)), 4<<20)
	for i := range fds {
		fd, err := unix.Open(filepath.Join(dir, fmt.Sprint(i)), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		for off := 0; off < warmFileSize; off += len(data) {
			if _, err := unix.Pwrite(fd, data, int64(off)); err != nil {
				b.Fatal(err)
			}
		}
		fds[i] = fd
	}
	var rt ratioTable
	for _, size := range []int{4 << 10, 128 << 10, 1 << 20} {
		for _, mode := range []string{"qd1", "batch32", "par16"} {
			for _, kind := range engineKinds {
				name := fmt.Sprintf("%dKiB/%s/%s", size>>10, mode, kind)
				b.Run(name, func(b *testing.B) {
					e := benchEngine(b, kind)
					per := warmRead(b, e, fds, size, mode)
					rt.record(b, name, size, per)
				})
			}
		}
	}
	rt.log(b)
}

// warmRead runs the read benchmark and returns the ops per iteration.
func warmRead(b *testing.B, e Engine, fds []int, size int, mode string) int {
	pos := func(r *rand.Rand) (int, int64) {
		return fds[r.IntN(len(fds))], r.Int64N(int64(warmFileSize-size)/4096) * 4096
	}
	check := func(n int, err error) {
		if err != nil || n != size {
			b.Fatalf("read: %d %v", n, err)
		}
	}
	switch mode {
	case "qd1":
		r := rand.New(rand.NewPCG(3, 3))
		buf := AllocAligned(size)
		b.SetBytes(int64(size))
		b.ResetTimer()
		for range b.N {
			fd, off := pos(r)
			check(e.ReadAt(fd, buf, off))
		}
		return 1
	case "batch32":
		r := rand.New(rand.NewPCG(4, 4))
		ops := make([]Op, 32)
		bufs := make([][]byte, len(ops))
		for i := range bufs {
			bufs[i] = AllocAligned(size)
		}
		b.SetBytes(int64(size * len(ops)))
		b.ResetTimer()
		for range b.N {
			for i := range ops {
				fd, off := pos(r)
				ops[i] = Op{Fd: fd, Off: off, Buf: bufs[i]}
			}
			e.Do(ops)
			for i := range ops {
				check(ops[i].N, ops[i].Err)
			}
		}
		return len(ops)
	default: // par16
		var seed atomicSeed
		b.SetBytes(int64(size))
		b.SetParallelism(warmParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(seed.next(), 5))
			buf := AllocAligned(size)
			for pb.Next() {
				fd, off := pos(r)
				check(e.ReadAt(fd, buf, off))
			}
		})
		return 1
	}
}

type atomicSeed struct {
	mu sync.Mutex
	n  uint64
}

func (s *atomicSeed) next() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.n
}

// BenchmarkVerifyRead is the batch path of verification (after a crash,
// `strata cache verify`): every 1 MiB block of cache files that are not
// in the page cache (dropped with FADV_DONTNEED before each pass), read
// one at a time (qd1, what verification issues today) or in Do batches
// of 8 and 32 (what a batched verification would issue).
func BenchmarkVerifyRead(b *testing.B) {
	const files, perFile = 4, 64 << 20
	dir := b.TempDir()
	fds := make([]int, files)
	data := randBytes(rand.New(rand.NewPCG(6, 6)), 4<<20)
	for i := range fds {
		fd, err := unix.Open(filepath.Join(dir, fmt.Sprint(i)), unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		for off := 0; off < perFile; off += len(data) {
			if _, err := unix.Pwrite(fd, data, int64(off)); err != nil {
				b.Fatal(err)
			}
		}
		if err := unix.Fsync(fd); err != nil {
			b.Fatal(err)
		}
		fds[i] = fd
	}
	drop := func() {
		for _, fd := range fds {
			_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
		}
	}
	var rt ratioTable
	for _, batch := range []int{1, 8, 32} {
		for _, kind := range engineKinds {
			name := fmt.Sprintf("batch=%d/%s", batch, kind)
			b.Run(name, func(b *testing.B) {
				e := benchEngine(b, kind)
				bufs := make([][]byte, batch)
				for i := range bufs {
					bufs[i] = AllocAligned(fillBlock)
				}
				ops := make([]Op, 0, batch)
				b.SetBytes(int64(files * perFile))
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					drop()
					b.StartTimer()
					for _, fd := range fds {
						for off := int64(0); off < perFile; off += int64(batch) * fillBlock {
							ops = ops[:0]
							for k := range batch {
								ops = append(ops, Op{Fd: fd, Off: off + int64(k)*fillBlock, Buf: bufs[k]})
							}
							e.Do(ops)
							for k := range ops {
								if ops[k].Err != nil || ops[k].N != fillBlock {
									b.Fatalf("read: %d %v", ops[k].N, ops[k].Err)
								}
							}
						}
					}
				}
				rt.record(b, name, files*perFile, 1)
			})
		}
	}
	rt.log(b)
}
