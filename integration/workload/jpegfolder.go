package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
)

// JPEGFolderSpec is a torchvision ImageFolder of real JPEG images, for the
// PyTorch DataLoader benchmark: Files pictures of ImageNet-like sizes
// (about 500×375) spread round-robin over Dirs class directories, each
// encoded between MinSize and MaxSize bytes. Python makes them (PIL and
// numpy, python/jpegfolder.py): the pixels are seeded, so the same seed
// gives the same images with the same libjpeg.
type JPEGFolderSpec struct {
	Prefix  string `json:"prefix"`
	Files   int    `json:"files"`
	Dirs    int    `json:"dirs"`
	MinSize int64  `json:"min_size"`
	MaxSize int64  `json:"max_size"`
}

const jpegScript = "jpegfolder.py"

// plan lists the images (sizes are the middle of the range until made).
func (s JPEGFolderSpec) plan(pfx string) ([]FileSpec, error) {
	if s.Files <= 0 || s.Dirs <= 0 || s.MinSize <= 0 || s.MaxSize <= s.MinSize {
		return nil, fmt.Errorf("workload: jpegfolder needs files and dirs > 0 and 0 < min size < max size")
	}
	out := make([]FileSpec, 0, s.Files)
	for i := 0; i < s.Files; i++ {
		p := path.Join(pfx, fmt.Sprintf("class%03d", i%s.Dirs), fmt.Sprintf("img%06d.jpg", i))
		out = append(out, FileSpec{Path: p, Size: (s.MinSize + s.MaxSize) / 2, kind: kindJPEG})
	}
	return out, nil
}

// generateJPEGs runs the generator into dir/<prefix> and records what it
// made (sizes within the spec's range) in the manifest at mpath.
func generateJPEGs(ctx context.Context, dir string, d Dataset, plan []FileSpec, mpath string, progress func(done, total int64)) (*Manifest, error) {
	s := d.JPEGFolder
	total := int64(len(plan)) * (s.MinSize + s.MaxSize) / 2
	if progress != nil {
		progress(0, total)
	}
	root := filepath.Join(dir, filepath.FromSlash(d.Prefixes()[0]))
	var res struct {
		Files int   `json:"files"`
		Bytes int64 `json:"bytes"`
	}
	err := runPython(ctx, jpegScript, &res, "--out", root, "--files", strconv.Itoa(s.Files),
		"--classes", strconv.Itoa(s.Dirs), "--seed", strconv.FormatUint(d.Seed, 10),
		"--min-bytes", strconv.FormatInt(s.MinSize, 10), "--max-bytes", strconv.FormatInt(s.MaxSize, 10))
	if err != nil {
		return nil, fmt.Errorf("workload: generate %s: %w", s.Prefix, err)
	}
	if res.Files != len(plan) {
		return nil, fmt.Errorf("workload: generate %s: %d images made, want %d", s.Prefix, res.Files, len(plan))
	}
	m := &Manifest{SpecHash: d.Hash(), Files: make([]FileEntry, len(plan))}
	for i, f := range plan {
		e, err := hashFile(dir, f.Path)
		if err != nil {
			return nil, err
		}
		if e.Size < s.MinSize || e.Size > s.MaxSize {
			return nil, fmt.Errorf("workload: generate %s: %s is %d bytes, outside %d-%d", s.Prefix, f.Path, e.Size, s.MinSize, s.MaxSize)
		}
		m.Files[i] = e
	}
	if err := saveManifest(mpath, m); err != nil {
		return nil, err
	}
	if progress != nil {
		progress(TotalSize(m.Files), TotalSize(m.Files))
	}
	return m, nil
}

// hashFile returns the manifest entry of an existing file.
func hashFile(dir, rel string) (FileEntry, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return FileEntry{}, fmt.Errorf("workload: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileEntry{}, fmt.Errorf("workload: hash %s: %w", rel, err)
	}
	return FileEntry{Path: rel, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}
