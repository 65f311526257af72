package uring

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/internal/testserver"
)

// TestConcurrentCallers: many goroutines share one engine and one file,
// each owning a region it writes and reads back in random batches.
func TestConcurrentCallers(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		fd, path := openTemp(t, "f")
		const goroutines, region = 32, 2 << 20
		if err := unix.Ftruncate(fd, goroutines*region); err != nil { // reads never meet EOF
			t.Fatal(err)
		}
		models := make([]model, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 11))
				base := int64(g) * region
				m := make(model, 0, region)
				for range 20 {
					var ops []Op
					for k := range 4 { // 4 disjoint slots of region/4
						l := sizes[r.IntN(len(sizes)-1)] % (region / 4)
						off := int64(k)*region/4 + r.Int64N(region/4-int64(l)+1)
						if r.IntN(2) == 0 {
							ops = append(ops, Op{Fd: fd, Off: base + off, Buf: randBytes(r, l), Write: true})
						} else {
							ops = append(ops, Op{Fd: fd, Off: base + off, Buf: make([]byte, l)})
						}
					}
					e.Do(ops)
					for i := range ops {
						op := &ops[i]
						if op.Write {
							if op.Err != nil || op.N != len(op.Buf) {
								t.Errorf("g%d write: %d %v", g, op.N, op.Err)
								return
							}
							m.write(op.Off-base, op.Buf)
							continue
						}
						want := make([]byte, len(op.Buf)) // unwritten: a hole, zeros
						copy(want, m.read(op.Off-base, len(op.Buf)))
						if op.Err != nil || op.N != len(op.Buf) {
							t.Errorf("g%d read off %d: %d %v", g, op.Off, op.N, op.Err)
							return
						}
						if !bytes.Equal(op.Buf, want) {
							t.Errorf("g%d read off %d len %d: wrong bytes at %d", g, op.Off, len(op.Buf), firstDiff(op.Buf[:op.N], want))
							return
						}
					}
					p := randBytes(r, 4096)
					if n, err := e.WriteAt(fd, p, base); n != len(p) || err != nil {
						t.Errorf("g%d WriteAt: %d %v", g, n, err)
						return
					}
					m.write(0, p)
					got := make([]byte, 4096)
					if n, err := e.ReadAt(fd, got, base); n != len(got) || err != nil || !bytes.Equal(got, p) {
						t.Errorf("g%d ReadAt: %d %v", g, n, err)
						return
					}
				}
				models[g] = m
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		whole := make(model, goroutines*region)
		for g, m := range models {
			whole.write(int64(g)*region, m)
		}
		checkFile(t, path, whole)
	})
}

// signalStorm sends SIGURG (Go's preemption signal, which the runtime
// ignores when unexpected) to every thread of the process until stop is
// closed, so that threads blocked in io_uring_enter get EINTR.
func signalStorm(stop <-chan struct{}) *atomic.Int64 {
	var sent atomic.Int64
	pid := unix.Getpid()
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ents, _ := os.ReadDir("/proc/self/task")
			for _, d := range ents {
				if tid, err := strconv.Atoi(d.Name()); err == nil && unix.Tgkill(pid, tid, unix.SIGURG) == nil {
					sent.Add(1)
				}
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	return &sent
}

// TestEINTRStorm: under a storm of signals to every thread, ops that
// really wait for the device (O_DIRECT reads, 1 MiB writes) all complete
// with the right bytes. For io_uring the test also requires that waits
// were in fact interrupted, or it did not test what it claims.
func TestEINTRStorm(t *testing.T) {
	for _, kind := range []Kind{KindPread, KindUring} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEngine(t, kind, DefaultOptions())
			fd, path := openTemp(t, "f")
			const size = 32 << 20
			m := model(make([]byte, 0, size))
			m.write(0, randBytes(rand.New(rand.NewPCG(1, 1)), 4<<20))
			for off := int64(4 << 20); off < size; off += 4 << 20 {
				m.write(off, m[:4<<20])
			}
			if _, err := unix.Pwrite(fd, m, 0); err != nil {
				t.Fatal(err)
			}
			if err := unix.Fsync(fd); err != nil {
				t.Fatal(err)
			}
			rfd := fd
			if dfd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0); err == nil {
				rfd = dfd // reads that go to the disk, not the page cache
				defer unix.Close(dfd)
			}
			stormRound(t, e, fd, rfd, m, size)
			if kind == KindUring {
				blockedWaitRound(t, e)
			}
		})
	}
}

// stormRound runs 8 readers and writers under a signal storm for 700 ms,
// checking every op, and reports whether some wait was interrupted.
func stormRound(t *testing.T, e Engine, fd, rfd int, m model, size int64) bool {
	t.Helper()
	before := statsOf(e).eintr.Load()
	stop := make(chan struct{})
	sent := signalStorm(stop)
	var wg sync.WaitGroup
	deadline := time.Now().Add(700 * time.Millisecond)
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 3))
			bufs := [4][]byte{AllocAligned(64 << 10), AllocAligned(64 << 10), AllocAligned(64 << 10), AllocAligned(1 << 20)}
			for time.Now().Before(deadline) {
				ops := make([]Op, 4)
				for i := range 3 {
					ops[i] = Op{Fd: rfd, Off: r.Int64N(size/(64<<10)) * (64 << 10), Buf: bufs[i]}
				}
				// rewrite a block with its own content: the model stays true
				woff := r.Int64N(size/(1<<20)) << 20
				copy(bufs[3], m[woff:])
				ops[3] = Op{Fd: fd, Off: woff, Buf: bufs[3], Write: true}
				e.Do(ops)
				for i := range ops {
					if err := checkRead(m, &ops[i]); ops[i].Err != nil || (!ops[i].Write && err != nil) {
						t.Errorf("op %d: N=%d err=%v %v", i, ops[i].N, ops[i].Err, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	st := statsOf(e)
	t.Logf("signals sent %d, EINTR retried %d, reaper waits %d", sent.Load(), st.eintr.Load(), st.waits.Load())
	return statsOf(e).eintr.Load() > before
}

// blockedWaitRound makes EINTR certain rather than likely: a read from an
// empty pipe keeps the reaper blocked in io_uring_enter for as long as the
// storm lasts (disk ops complete too fast to be interrupted on a fast
// disk), then the pipe is fed and the read must return exactly its bytes.
func blockedWaitRound(t *testing.T, e Engine) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	before := statsOf(e).eintr.Load()
	stop := make(chan struct{})
	sent := signalStorm(stop)
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	buf := make([]byte, 16)
	go func() {
		n, err := e.ReadAt(p[0], buf, 0)
		done <- result{n, err}
	}()
	// Storm until an interrupted wait was counted (bounded: a kernel that
	// restarts the wait instead of returning EINTR fails the test).
	for deadline := time.Now().Add(5 * time.Second); statsOf(e).eintr.Load() == before && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	msg := []byte("sixteen bytes ok")
	if _, err := unix.Write(p[1], msg); err != nil {
		t.Fatal(err)
	}
	r := <-done
	close(stop)
	if r.err != nil || r.n != len(msg) || !bytes.Equal(buf[:r.n], msg) {
		t.Errorf("pipe read under storm: n=%d err=%v %q", r.n, r.err, buf[:r.n])
	}
	got := statsOf(e).eintr.Load() - before
	t.Logf("blocked wait: signals sent %d, EINTR retried %d", sent.Load(), got)
	if got == 0 {
		t.Errorf("a wait blocked for 5 s under %d signals was never interrupted: the test did not exercise EINTR", sent.Load())
	}
}

// statsOf returns an engine's counters, summed over its rings.
func statsOf(e Engine) *stats {
	switch e := e.(type) {
	case *uringEngine:
		var sum stats
		for _, s := range e.shards {
			sum.eintr.Add(s.st.eintr.Load())
			sum.waits.Add(s.st.waits.Load())
			sum.resubmits.Add(s.st.resubmits.Load())
		}
		return &sum
	case *preadEngine:
		return &e.st
	}
	panic(fmt.Sprintf("unknown engine %T", e))
}

// TestCloseWhileBusy: Close while goroutines hammer the engine with 1 MiB
// writes and read-backs returns cleanly; every call either completes
// correctly or fails with ErrClosed, and none crashes on the torn-down ring.
func TestCloseWhileBusy(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		fd, _ := openTemp(t, "f")
		var wg sync.WaitGroup
		var completed, refused atomic.Int64
		for g := range 16 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 5))
				base := int64(g) << 21
				for {
					p := randBytes(r, 1<<20)
					ops := []Op{{Fd: fd, Off: base, Buf: p, Write: true}, {Fd: fd, Off: base + 1<<20, Buf: p, Write: true}}
					e.Do(ops)
					if errors.Is(ops[0].Err, ErrClosed) {
						refused.Add(1)
						return
					}
					if ops[0].Err != nil || ops[1].Err != nil {
						t.Errorf("write: %v %v", ops[0].Err, ops[1].Err)
						return
					}
					got := make([]byte, 1<<20)
					n, err := e.ReadAt(fd, got, base+1<<20)
					if errors.Is(err, ErrClosed) {
						refused.Add(1)
						return
					}
					if err != nil || n != len(p) || !bytes.Equal(got, p) {
						t.Errorf("read back: %d %v", n, err)
						return
					}
					completed.Add(1)
				}
			})
		}
		// Close while the goroutines are busy, once some rounds are done
		// (a loaded machine may take a while to finish the first).
		for deadline := time.Now().Add(30 * time.Second); completed.Load() < 16 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if err := e.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		if completed.Load() == 0 || refused.Load() != 16 {
			t.Errorf("completed %d rounds, %d goroutines saw ErrClosed; want > 0 and 16", completed.Load(), refused.Load())
		}
		if u, ok := e.(*uringEngine); ok {
			for i, s := range u.shards {
				select {
				case <-s.reaperDone:
				default:
					t.Errorf("ring %d: reaper still running after Close", i)
				}
				if s.ring.fd != -1 || s.ring.sqMem != nil || s.pending.Load() != 0 {
					t.Errorf("ring %d not torn down: fd %d, pending %d", i, s.ring.fd, s.pending.Load())
				}
			}
		}
	})
}

// TestUseAfterClose: every call after Close fails with ErrClosed.
func TestUseAfterClose(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		fd, _ := openTemp(t, "f")
		if err := e.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		ops := []Op{{Fd: fd, Buf: make([]byte, 10)}, {Fd: fd, Buf: []byte("x"), Write: true}}
		e.Do(ops)
		_, errR := e.ReadAt(fd, make([]byte, 10), 0)
		_, errW := e.WriteAt(fd, []byte("x"), 0)
		for i, err := range []error{ops[0].Err, ops[1].Err, errR, errW, e.Close()} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("call %d after Close: %v, want ErrClosed", i, err)
			}
		}
		if st, _ := os.Stat(fmt.Sprintf("/proc/self/fd/%d", fd)); st == nil {
			t.Errorf("Close closed the caller's fd")
		}
	})
}

// TestUnavailableUnderSeccomp re-runs itself in a child that a seccomp
// filter denies io_uring_setup, like Docker's default profile: New(uring)
// must fail with ErrUnavailable (and the errno), New(auto) must still work.
func TestUnavailableUnderSeccomp(t *testing.T) {
	if os.Getenv("STRATA_URING_SECCOMP_CHILD") == "1" {
		seccompChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnavailableUnderSeccomp$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "STRATA_URING_SECCOMP_CHILD=1")
	out, err := cmd.CombinedOutput()
	switch {
	case strings.Contains(string(out), "--- SKIP"):
		testserver.SkipOrFail(t, "child skipped:\n%s", out)
	case err != nil || !strings.Contains(string(out), "CHILD-OK"):
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func seccompChild(t *testing.T) {
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_IO_URING_SETUP},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		testserver.SkipOrFail(t, "prctl(NO_NEW_PRIVS): %v", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		testserver.SkipOrFail(t, "seccomp filter: %v", errno)
	}
	_, err := New(KindUring, DefaultOptions())
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "seccomp") {
		t.Fatalf("New(uring) under seccomp: %v; want ErrUnavailable, EPERM and the reason", err)
	}
	t.Logf("New(uring): %v", err)
	e, err := New(KindAuto, DefaultOptions())
	if err != nil || e.Name() != "pread" {
		t.Fatalf("New(auto) under seccomp: %v", err)
	}
	e.Close()
	fmt.Println("CHILD-OK")
}
