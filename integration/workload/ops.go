package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// prepare validates a task and does the untimed setup (opening the file of
// a pread task); the returned function does the timed part.
func prepare(t Task) (func() WorkerResult, error) {
	switch t.Op {
	case OpReadFiles:
		if len(t.SHA256) > 0 && len(t.SHA256) != len(t.Paths) || len(t.Sizes) > 0 && len(t.Sizes) != len(t.Paths) {
			return nil, fmt.Errorf("read: %d checksums and %d sizes for %d paths", len(t.SHA256), len(t.Sizes), len(t.Paths))
		}
		if t.BufSize <= 0 {
			t.BufSize = 128 << 10
		}
		return func() WorkerResult { return readFiles(t) }, nil
	case OpPread:
		f, err := os.Open(t.Path)
		if err != nil {
			return nil, fmt.Errorf("pread: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("pread: %w", err)
		}
		if t.Size <= 0 || int64(t.Size) > st.Size() {
			f.Close()
			return nil, fmt.Errorf("pread: size %d does not fit %s (%d bytes)", t.Size, t.Path, st.Size())
		}
		return func() WorkerResult { defer f.Close(); return preadRandom(t, f, st.Size()) }, nil
	case OpWalk:
		if _, err := os.Stat(t.Root); err != nil {
			return nil, fmt.Errorf("walk: %w", err)
		}
		return func() WorkerResult { return walk(t) }, nil
	}
	return nil, fmt.Errorf("unknown op %q", t.Op)
}

// deadline returns the stop time of a task, or the zero time for none.
func deadline(start time.Time, t Task) time.Time {
	if t.MaxDuration <= 0 {
		return time.Time{}
	}
	return start.Add(t.MaxDuration)
}

func readFiles(t Task) WorkerResult {
	buf := make([]byte, t.BufSize)
	var h hash.Hash
	if len(t.SHA256) > 0 {
		h = sha256.New()
	}
	start := time.Now()
	stop := deadline(start, t)
	res := WorkerResult{StartNS: start.UnixNano(), LatNS: make([]int64, 0, len(t.Paths))}
	for i, p := range t.Paths {
		if !stop.IsZero() && time.Now().After(stop) {
			res.Truncated = true
			break
		}
		t0 := time.Now()
		n, sum, err := readWhole(p, buf, h)
		res.LatNS = append(res.LatNS, int64(time.Since(t0)))
		if err != nil {
			res.Err = err.Error()
			break
		}
		res.Ops++
		res.Bytes += n
		if len(t.Sizes) > 0 && n != t.Sizes[i] {
			// Reading the wrong data is a failure, not a measurement.
			res.Err = fmt.Sprintf("%s: read %d bytes, want %d", p, n, t.Sizes[i])
			break
		}
		if h != nil {
			if sum != t.SHA256[i] {
				res.Err = fmt.Sprintf("%s: sha256 %s, want %s", p, sum, t.SHA256[i])
				break
			}
			res.Verified++
		}
	}
	res.EndNS = time.Now().UnixNano()
	return res
}

// readWhole opens, reads to EOF with len(buf) reads and closes a file, as a
// data loader does; with h it returns the hex sha256 of the content.
func readWhole(p string, buf []byte, h hash.Hash) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	if h != nil {
		h.Reset()
	}
	var n int64
	for {
		m, err := f.Read(buf)
		if m > 0 {
			n += int64(m)
			if h != nil {
				h.Write(buf[:m])
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return n, "", fmt.Errorf("read %s: %w", p, err)
		}
	}
	if err := f.Close(); err != nil {
		return n, "", fmt.Errorf("close %s: %w", p, err)
	}
	if h == nil {
		return n, "", nil
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// preadRandom does t.Count preads of t.Size bytes at offsets aligned to
// t.Size drawn uniformly from the file (fio randread style).
func preadRandom(t Task, f *os.File, size int64) WorkerResult {
	buf := make([]byte, t.Size)
	slots := size / int64(t.Size)
	rng := rand.New(rand.NewPCG(t.Seed, 0x5eed))
	start := time.Now()
	stop := deadline(start, t)
	res := WorkerResult{StartNS: start.UnixNano(), LatNS: make([]int64, 0, t.Count)}
	for i := 0; i < t.Count; i++ {
		if !stop.IsZero() && i%16 == 0 && time.Now().After(stop) {
			res.Truncated = true
			break
		}
		off := rng.Int64N(slots) * int64(t.Size)
		t0 := time.Now()
		n, err := f.ReadAt(buf, off)
		res.LatNS = append(res.LatNS, int64(time.Since(t0)))
		if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
			res.Err = fmt.Sprintf("pread %s at %d: %v", t.Path, off, err)
			break
		}
		res.Ops++
		res.Bytes += int64(n)
	}
	res.EndNS = time.Now().UnixNano()
	return res
}

// walk is `ls -lR`: every directory is read and every entry lstat'ed. One
// operation is one entry; the recorded latency is per directory (its
// readdir plus the lstat of its entries).
func walk(t Task) WorkerResult {
	start := time.Now()
	stop := deadline(start, t)
	res := WorkerResult{StartNS: start.UnixNano()}
	var walkDir func(dir string) error
	walkDir = func(dir string) error {
		if !stop.IsZero() && time.Now().After(stop) {
			res.Truncated = true
			return fs.SkipAll
		}
		t0 := time.Now()
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		var subdirs []string
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			st, err := os.Lstat(p)
			if err != nil {
				return err
			}
			res.Ops++
			if st.IsDir() {
				subdirs = append(subdirs, p)
			}
		}
		res.LatNS = append(res.LatNS, int64(time.Since(t0)))
		for _, d := range subdirs {
			if err := walkDir(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walkDir(t.Root); err != nil && !errors.Is(err, fs.SkipAll) {
		res.Err = err.Error()
	}
	res.EndNS = time.Now().UnixNano()
	return res
}
