package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratafs/strata/backend"
	"github.com/stratafs/strata/backend/s3"
	"github.com/stratafs/strata/internal/testserver"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// dataset is small files (1-64 KiB) and large ones (8-48 MiB) whose bytes
// are a function of (file, offset), so a reader checks any range without
// holding the data.
type dataset struct{ small, large int }

func (d dataset) count() int { return d.small + d.large }

func (d dataset) name(i int) string {
	if i < d.small {
		return fmt.Sprintf("small/d%02d/%05d", i%50, i)
	}
	return fmt.Sprintf("large/%03d.bin", i-d.small)
}

func (d dataset) size(i int) int64 {
	if i < d.small {
		return 1 + int64(i*7919)%(64<<10)
	}
	return 8<<20 + int64(i*104729)%(40<<20)
}

func (d dataset) bytes() int64 {
	var n int64
	for i := range d.count() {
		n += d.size(i)
	}
	return n
}

// fill writes file i's bytes from off into p.
func fill(p []byte, i int, off int64) {
	var w [8]byte
	for len(p) > 0 {
		word := off / 8
		x := uint64(word)*0x9e3779b97f4a7c15 ^ uint64(i+1)*0xbf58476d1ce4e5b9
		x = (x ^ x>>31) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(w[:], x^x>>29)
		n := copy(p, w[off%8:])
		p, off = p[n:], off+int64(n)
	}
}

// readerAt serves file i to the uploader.
type readerAt struct{ i int }

func (r readerAt) ReadAt(p []byte, off int64) (int, error) { fill(p, r.i, off); return len(p), nil }

func (d dataset) upload(mc *testserver.MinIO, bucket string) error {
	o := s3.DefaultOptions()
	o.Endpoint, o.ForcePathStyle, o.Region = mc.Endpoint, true, mc.Region
	o.AccessKeyID, o.SecretAccessKey = mc.AccessKey, mc.SecretKey
	be, err := s3.New(context.Background(), bucket, o)
	if err != nil {
		return err
	}
	defer be.Close()
	idx := make(chan int)
	var wg sync.WaitGroup
	var first atomic.Value
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if _, err := be.Put(context.Background(), d.name(i), readerAt{i}, d.size(i), backend.PutOptions{}); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for i := range d.count() {
		idx <- i
	}
	close(idx)
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	return nil
}

// phaseStats is what one load phase did.
type phaseStats struct {
	Reads      int64   `json:"reads"`
	Bytes      int64   `json:"bytes"`
	WrongBytes int64   `json:"wrong_reads"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	SlowestMS  int64   `json:"slowest_read_ms"`
	MiBps      float64 `json:"mib_per_s"`
}

func (s phaseStats) String() string {
	return fmt.Sprintf("%d reads, %d MiB (%.0f MiB/s), %d wrong, %d errors, slowest %d ms %s",
		s.Reads, s.Bytes>>20, s.MiBps, s.WrongBytes, s.Errors, s.SlowestMS, s.FirstError)
}

// readLoad runs n readers for d: 80% of reads are whole small files, the
// rest large files read whole or at 16 random ranges; every byte checked.
func readLoad(dir string, ds dataset, n int, d time.Duration, seed uint64) phaseStats {
	var reads, byts, wrong, errs, slowest atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			buf, want := make([]byte, 256<<10), make([]byte, 256<<10)
			for time.Now().Before(deadline) {
				i := r.IntN(ds.small)
				if r.IntN(5) == 0 && ds.large > 0 {
					i = ds.small + r.IntN(ds.large)
				}
				start := time.Now()
				nb, ok, err := readOne(filepath.Join(dir, ds.name(i)), i, ds.size(i), r, buf, want)
				if ms := time.Since(start).Milliseconds(); ms > slowest.Load() {
					slowest.Store(ms)
				}
				reads.Add(1)
				byts.Add(nb)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else if !ok {
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	st := phaseStats{Reads: reads.Load(), Bytes: byts.Load(), WrongBytes: wrong.Load(), Errors: errs.Load(), SlowestMS: slowest.Load()}
	st.FirstError, _ = firstErr.Load().(string)
	st.MiBps = float64(st.Bytes) / (1 << 20) / d.Seconds()
	return st
}

// readOne reads file i (of size) whole or, for large files half the
// time, at random ranges; ok is false if any byte differs.
func readOne(path string, i int, size int64, r *rand.Rand, buf, want []byte) (n int64, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	check := func(off int64, m int) bool {
		fill(want[:m], i, off)
		return bytes.Equal(buf[:m], want[:m])
	}
	ok = true
	if size < 1<<20 || r.IntN(2) == 0 {
		for off := int64(0); ; {
			m, err := f.ReadAt(buf, off)
			if m > 0 {
				ok = ok && check(off, m)
				off += int64(m)
				n += int64(m)
			}
			if err == io.EOF {
				return n, ok && off == size, nil
			}
			if err != nil {
				return n, ok, err
			}
		}
	}
	for range 16 {
		m := 4<<10 + r.IntN(252<<10)
		off := r.Int64N(size - int64(m))
		got, err := f.ReadAt(buf[:m], off)
		n += int64(got)
		if err != nil {
			return n, ok, err
		}
		ok = ok && check(off, m)
	}
	return n, ok, nil
}
