package workload

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
)

// Dataset describes a deterministic tree of files: every part lives under
// its own top-level prefix, so that a mount of "bucket/<prefix>" sees just
// that part. Nil parts are absent.
type Dataset struct {
	// Seed selects the bytes (and jittered sizes); the same seed gives the
	// same tree everywhere.
	Seed        uint64           `json:"seed"`
	ImageFolder *ImageFolderSpec `json:"imagefolder,omitempty"`
	WebDataset  *WebDatasetSpec  `json:"webdataset,omitempty"`
	BigFiles    *BigFileSpec     `json:"bigfiles,omitempty"`
	Listing     *ListingSpec     `json:"listing,omitempty"`
	ListingDeep *ListingSpec     `json:"listing_deep,omitempty"` // a second tree, of many small directories
	JPEGFolder  *JPEGFolderSpec  `json:"jpegfolder,omitempty"`
	Samples     *SamplesSpec     `json:"samples,omitempty"`
}

// SamplesSpec is Files records of one sample each, of about Size bytes
// (uniformly Size*(1±Jitter)), in one directory: MLPerf Storage's unet3d
// layout (one .npz per sample; the bytes here are random, never decoded).
type SamplesSpec struct {
	Prefix string  `json:"prefix"`
	Files  int     `json:"files"`
	Size   int64   `json:"size"`
	Jitter float64 `json:"jitter,omitempty"`
}

// ImageFolderSpec is torchvision ImageFolder style: Files samples of about
// Size bytes spread round-robin over Dirs class directories.
type ImageFolderSpec struct {
	Prefix string `json:"prefix"`
	Files  int    `json:"files"`
	Dirs   int    `json:"dirs"`
	Size   int64  `json:"size"`
	// Jitter spreads sizes uniformly over Size*(1±Jitter); 0 gives every
	// file exactly Size bytes.
	Jitter float64 `json:"jitter,omitempty"`
}

// WebDatasetSpec is WebDataset style: Shards tar files of at most
// ShardSize bytes, each holding samples of SampleSize bytes (a ".jpg"
// member and a small ".cls" member per sample).
type WebDatasetSpec struct {
	Prefix     string `json:"prefix"`
	Shards     int    `json:"shards"`
	ShardSize  int64  `json:"shard_size"`
	SampleSize int64  `json:"sample_size"`
}

// BigFileSpec is Count files of Size random bytes ("big-00.bin", ...),
// such as a memory-mapped token file.
type BigFileSpec struct {
	Prefix string `json:"prefix"`
	Count  int    `json:"count"`
	Size   int64  `json:"size"`
}

// ListingSpec is Keys tiny objects of Size bytes under a two-level tree of
// Dirs × SubDirs directories, for listing benchmarks.
type ListingSpec struct {
	Prefix  string `json:"prefix"`
	Keys    int    `json:"keys"`
	Dirs    int    `json:"dirs"`
	SubDirs int    `json:"subdirs"`
	Size    int64  `json:"size"`
}

// fileKind selects how a file's bytes are produced.
type fileKind uint8

const (
	kindRandom fileKind = iota // seeded random bytes
	kindShard                  // a tar of seeded random samples
	kindJPEG                   // a JPEG made by python/jpegfolder.py
)

// FileSpec is one planned file: its slash-separated path relative to the
// dataset root and its size (exact for random files; an upper bound for
// shards until written).
type FileSpec struct {
	Path string
	Size int64
	kind fileKind
	// shard parameters
	sampleSize int64
}

// Hash identifies the dataset's definition: generated trees are reused
// only when it matches.
func (d Dataset) Hash() string {
	b, _ := json.Marshal(d)
	if d.JPEGFolder != nil {
		// Another generator makes other pictures.
		b = append(b, scriptHash(jpegScript)...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Plan lists every file of the dataset in a fixed order.
func (d Dataset) Plan() ([]FileSpec, error) {
	var out []FileSpec
	seen := map[string]bool{}
	add := func(prefix string) (string, error) {
		p := strings.Trim(prefix, "/")
		if p == "" || strings.Contains(p, "..") {
			return "", fmt.Errorf("workload: invalid prefix %q", prefix)
		}
		if seen[p] {
			return "", fmt.Errorf("workload: prefix %q used twice", prefix)
		}
		seen[p] = true
		return p, nil
	}
	if s := d.ImageFolder; s != nil {
		pfx, err := add(s.Prefix)
		if err != nil {
			return nil, err
		}
		if s.Files <= 0 || s.Dirs <= 0 || s.Size <= 0 {
			return nil, fmt.Errorf("workload: imagefolder needs files, dirs and size > 0")
		}
		for i := 0; i < s.Files; i++ {
			p := path.Join(pfx, fmt.Sprintf("class%03d", i%s.Dirs), fmt.Sprintf("img%06d.jpg", i))
			out = append(out, FileSpec{Path: p, Size: jittered(d.Seed, p, s.Size, s.Jitter)})
		}
	}
	if s := d.WebDataset; s != nil {
		pfx, err := add(s.Prefix)
		if err != nil {
			return nil, err
		}
		if s.Shards <= 0 || s.SampleSize <= 0 || s.ShardSize < s.SampleSize+4096 {
			return nil, fmt.Errorf("workload: webdataset needs shards > 0 and shard size > sample size")
		}
		for i := 0; i < s.Shards; i++ {
			p := path.Join(pfx, fmt.Sprintf("shard-%06d.tar", i))
			out = append(out, FileSpec{Path: p, Size: s.ShardSize, kind: kindShard, sampleSize: s.SampleSize})
		}
	}
	if s := d.BigFiles; s != nil {
		pfx, err := add(s.Prefix)
		if err != nil {
			return nil, err
		}
		if s.Count <= 0 || s.Size <= 0 {
			return nil, fmt.Errorf("workload: bigfiles needs count and size > 0")
		}
		for i := 0; i < s.Count; i++ {
			out = append(out, FileSpec{Path: path.Join(pfx, fmt.Sprintf("big-%02d.bin", i)), Size: s.Size})
		}
	}
	for _, s := range []*ListingSpec{d.Listing, d.ListingDeep} {
		if s == nil {
			continue
		}
		pfx, err := add(s.Prefix)
		if err != nil {
			return nil, err
		}
		if s.Keys <= 0 || s.Dirs <= 0 || s.SubDirs <= 0 || s.Size <= 0 {
			return nil, fmt.Errorf("workload: listing needs keys, dirs, subdirs and size > 0")
		}
		leaves := s.Dirs * s.SubDirs
		for i := 0; i < s.Keys; i++ {
			leaf := i % leaves
			p := path.Join(pfx, fmt.Sprintf("d%03d", leaf/s.SubDirs), fmt.Sprintf("s%03d", leaf%s.SubDirs), fmt.Sprintf("k%07d", i))
			out = append(out, FileSpec{Path: p, Size: s.Size})
		}
	}
	if s := d.JPEGFolder; s != nil {
		pfx, err := add(s.Prefix)
		if err != nil {
			return nil, err
		}
		files, err := s.plan(pfx)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	if s := d.Samples; s != nil {
		pfx, err := add(s.Prefix)
		if err != nil {
			return nil, err
		}
		if s.Files <= 0 || s.Size <= 0 || s.Jitter < 0 || s.Jitter >= 1 {
			return nil, fmt.Errorf("workload: samples needs files and size > 0, jitter in [0, 1)")
		}
		for i := 0; i < s.Files; i++ {
			p := path.Join(pfx, fmt.Sprintf("sample-%06d.npz", i))
			out = append(out, FileSpec{Path: p, Size: jittered(d.Seed, p, s.Size, s.Jitter)})
		}
	}
	return out, nil
}

// Prefixes lists the top-level prefixes of the parts present, trimmed of
// slashes.
func (d Dataset) Prefixes() []string {
	var out []string
	if d.ImageFolder != nil {
		out = append(out, strings.Trim(d.ImageFolder.Prefix, "/"))
	}
	if d.WebDataset != nil {
		out = append(out, strings.Trim(d.WebDataset.Prefix, "/"))
	}
	if d.BigFiles != nil {
		out = append(out, strings.Trim(d.BigFiles.Prefix, "/"))
	}
	if d.Listing != nil {
		out = append(out, strings.Trim(d.Listing.Prefix, "/"))
	}
	if d.ListingDeep != nil {
		out = append(out, strings.Trim(d.ListingDeep.Prefix, "/"))
	}
	if d.JPEGFolder != nil {
		out = append(out, strings.Trim(d.JPEGFolder.Prefix, "/"))
	}
	if d.Samples != nil {
		out = append(out, strings.Trim(d.Samples.Prefix, "/"))
	}
	return out
}

// jittered returns a deterministic size in base*(1±jitter), at least 1.
func jittered(seed uint64, p string, base int64, jitter float64) int64 {
	if jitter <= 0 {
		return base
	}
	r := rand.New(rand.NewPCG(seed, pathHash(p)))
	n := base + int64((r.Float64()*2-1)*jitter*float64(base))
	return max(n, 1)
}

// pathHash folds a path into 64 bits for seeding.
func pathHash(p string) uint64 {
	sum := sha256.Sum256([]byte(p))
	return binary.LittleEndian.Uint64(sum[:8])
}

// newSource returns the byte stream of one file: ChaCha8 keyed by the
// dataset seed and the path.
func newSource(seed uint64, p string) *rand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:8], seed)
	h := sha256.Sum256([]byte(p))
	copy(key[8:], h[:24])
	return rand.NewChaCha8(key)
}
