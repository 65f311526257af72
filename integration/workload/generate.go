package workload

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Manifest records a generated dataset: the definition's hash and every
// file with its size and sha256.
type Manifest struct {
	SpecHash string      `json:"spec_hash"`
	Files    []FileEntry `json:"files"`
}

// FileEntry is one generated file (Path is slash-separated and relative
// to the dataset root).
type FileEntry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Under returns the entries whose path lies under prefix, in manifest order.
func (m *Manifest) Under(prefix string) []FileEntry {
	prefix = strings.Trim(prefix, "/") + "/"
	var out []FileEntry
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, prefix) {
			out = append(out, f)
		}
	}
	return out
}

// TotalSize sums the sizes of entries.
func TotalSize(entries []FileEntry) int64 {
	var n int64
	for _, e := range entries {
		n += e.Size
	}
	return n
}

// Generate writes the dataset under dir (dir/<prefix>/...) and returns its
// manifest. Each part is generated on its own, with its manifest beside it
// (dir/.manifest-<prefix>.json): a part generated before from the same
// definition, with every file present at its recorded size, is reused as
// is. progress, if not nil, is called now and then with the bytes written
// so far by the part being generated.
func Generate(ctx context.Context, dir string, d Dataset, progress func(done, total int64)) (*Manifest, error) {
	if _, err := d.Plan(); err != nil {
		return nil, err
	}
	all := &Manifest{SpecHash: d.Hash()}
	for _, part := range d.Parts() {
		m, err := generatePart(ctx, dir, part, progress)
		if err != nil {
			return nil, err
		}
		all.Files = append(all.Files, m.Files...)
	}
	return all, nil
}

// Parts splits the dataset into one dataset per part (same seed).
func (d Dataset) Parts() []Dataset {
	var out []Dataset
	if d.ImageFolder != nil {
		out = append(out, Dataset{Seed: d.Seed, ImageFolder: d.ImageFolder})
	}
	if d.WebDataset != nil {
		out = append(out, Dataset{Seed: d.Seed, WebDataset: d.WebDataset})
	}
	if d.BigFiles != nil {
		out = append(out, Dataset{Seed: d.Seed, BigFiles: d.BigFiles})
	}
	if d.Listing != nil {
		out = append(out, Dataset{Seed: d.Seed, Listing: d.Listing})
	}
	if d.ListingDeep != nil {
		out = append(out, Dataset{Seed: d.Seed, ListingDeep: d.ListingDeep})
	}
	if d.JPEGFolder != nil {
		out = append(out, Dataset{Seed: d.Seed, JPEGFolder: d.JPEGFolder})
	}
	if d.Samples != nil {
		out = append(out, Dataset{Seed: d.Seed, Samples: d.Samples})
	}
	return out
}

func manifestPath(dir, prefix string) string {
	return filepath.Join(dir, ".manifest-"+strings.ReplaceAll(prefix, "/", "_")+".json")
}

// generatePart generates (or reuses) a dataset of exactly one part.
func generatePart(ctx context.Context, dir string, d Dataset, progress func(done, total int64)) (*Manifest, error) {
	prefix := d.Prefixes()[0]
	plan, err := d.Plan()
	if err != nil {
		return nil, err
	}
	mpath := manifestPath(dir, prefix)
	if m, err := loadManifest(mpath); err == nil && m.SpecHash == d.Hash() && m.intact(dir) {
		return m, nil
	}
	_ = os.Remove(mpath)
	if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(prefix))); err != nil {
		return nil, fmt.Errorf("workload: generate: %w", err)
	}
	if d.JPEGFolder != nil {
		return generateJPEGs(ctx, dir, d, plan, mpath, progress)
	}

	var total int64
	for _, f := range plan {
		total += f.Size
	}
	entries := make([]FileEntry, len(plan))
	var (
		mu       sync.Mutex
		done     int64
		lastTick time.Time
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan int)
	for w := 0; w < max(2, runtime.NumCPU()); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				e, err := writeFile(dir, d.Seed, plan[i])
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				entries[i] = e
				done += plan[i].Size
				if progress != nil && time.Since(lastTick) > time.Second {
					lastTick = time.Now()
					progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range plan {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("workload: generate: %w", err)
	}
	m := &Manifest{SpecHash: d.Hash(), Files: entries}
	if err := saveManifest(mpath, m); err != nil {
		return nil, err
	}
	if progress != nil {
		progress(total, total)
	}
	return m, nil
}

func saveManifest(path string, m *Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("workload: write manifest: %w", err)
	}
	return nil
}

func loadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// intact reports whether every manifest file exists at its size.
func (m *Manifest) intact(dir string) bool {
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil || st.Size() != f.Size {
			return false
		}
	}
	return len(m.Files) > 0
}

// writeFile creates one file of the plan and returns its manifest entry.
func writeFile(dir string, seed uint64, f FileSpec) (FileEntry, error) {
	full := filepath.Join(dir, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return FileEntry{}, fmt.Errorf("workload: generate %s: %w", f.Path, err)
	}
	out, err := os.Create(full)
	if err != nil {
		return FileEntry{}, fmt.Errorf("workload: generate %s: %w", f.Path, err)
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(out, h), 1<<20)
	cw := &countWriter{w: bw}
	switch f.kind {
	case kindShard:
		err = writeShard(cw, seed, f)
	default:
		_, err = io.CopyN(cw, newSource(seed, f.Path), f.Size)
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return FileEntry{}, fmt.Errorf("workload: generate %s: %w", f.Path, err)
	}
	return FileEntry{Path: f.Path, Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// writeShard writes a tar of samples (NNNNNN.jpg of sampleSize random
// bytes plus NNNNNN.cls) while the archive stays within f.Size.
func writeShard(w *countWriter, seed uint64, f FileSpec) error {
	tw := tar.NewWriter(w)
	src := newSource(seed, f.Path)
	mtime := time.Unix(1700000000, 0)
	const endOfArchive = 1024
	for i := 0; ; i++ {
		cls := []byte(fmt.Sprintf("%d\n", i%1000))
		need := 512 + roundUp(f.sampleSize, 512) + 512 + roundUp(int64(len(cls)), 512)
		if w.n+need+endOfArchive > f.Size {
			break
		}
		name := fmt.Sprintf("%06d", i)
		if err := tw.WriteHeader(&tar.Header{Name: name + ".jpg", Mode: 0o644, Size: f.sampleSize, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		if _, err := io.CopyN(tw, src, f.sampleSize); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name + ".cls", Mode: 0o644, Size: int64(len(cls)), ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		if _, err := tw.Write(cls); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	// Pad to the exact size with zero blocks (tar readers stop at the
	// end-of-archive marker), so shard sizes are round numbers.
	if pad := f.Size - w.n; pad > 0 {
		if _, err := w.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	if w.n != f.Size {
		return errors.New("shard size mismatch")
	}
	return nil
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
