package index

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// ErrCorrupt marks a record that cannot be decoded.
var ErrCorrupt = errors.New("index: corrupt record")

// ID names one object version in the cache: SHA-256 of (source, key,
// version). Cache files are named by it, never by the key.
type ID [32]byte

// String is the lowercase hex form used for file names.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID is the inverse of String.
func ParseID(s string) (ID, error) {
	var id ID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("index: bad id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// ObjectRecord is what the index knows about one cached object version.
type ObjectRecord struct {
	Source     string // backend.String() of the source
	Key        string // full key in the source
	Version    string // ETag, generation or fingerprint
	Size       int64
	MTime      int64 // unix nanoseconds
	BlockSize  int64
	LastAccess int64  // unix seconds; updated lazily
	Flags      uint32 // FlagLocal...
}

// FlagLocal marks an object whose bytes were written through the mount
// (the write path) rather than fetched.
const FlagLocal = 1 << 0

// NumBlocks is the number of blocks covering the object.
func (r ObjectRecord) NumBlocks() int64 {
	if r.BlockSize <= 0 || r.Size <= 0 {
		return 0
	}
	n := r.Size / r.BlockSize // no Size+BlockSize-1: it overflows near MaxInt64
	if r.Size%r.BlockSize != 0 {
		n++
	}
	return n
}

// BlockLen is the length of block i (the last one may be short), 0 for
// a block outside the object.
func (r ObjectRecord) BlockLen(i int64) int64 {
	if i < 0 || i >= r.NumBlocks() {
		return 0
	}
	off := i * r.BlockSize // cannot overflow: i*BlockSize < Size
	return min(r.BlockSize, r.Size-off)
}

// BlockInfo is the value of a block presence key.
type BlockInfo struct {
	CRC uint32 // CRC32C (Castagnoli) of the block's bytes
	Len uint32 // bytes in the block
}

// EntryKind says what a name is.
type EntryKind uint8

const (
	KindAbsent EntryKind = iota // negative lookup result
	KindFile
	KindDir
)

// EntryRecord is one name in a listing, or the result of a point lookup.
type EntryRecord struct {
	Kind      EntryKind
	Size      int64
	MTime     int64 // unix nanoseconds
	Version   string
	FetchedAt int64 // unix nanoseconds; point lookups only
}

// DirRecord is the header of a cached listing.
type DirRecord struct {
	FetchedAt int64 // unix nanoseconds when the listing completed
	Complete  bool  // false while a listing is being (re)written
	Entries   int64
}

const recordV1 = 1

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 { return decodeVar(d, binary.Uvarint) }
func (d *decoder) varint() int64   { return decodeVar(d, binary.Varint) }

// decodeVar reads one varint with read (binary.Uvarint or Varint); the
// first failure sticks in d.err and every later read returns zero.
func decodeVar[T uint64 | int64](d *decoder, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b)
	if n <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = ErrCorrupt
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) version() {
	if d.uvarint() != recordV1 && d.err == nil {
		d.err = ErrCorrupt
	}
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = ErrCorrupt
	}
	return d.err
}

// MarshalObject encodes r.
func MarshalObject(r ObjectRecord) []byte {
	e := encoder{b: make([]byte, 0, 48+len(r.Source)+len(r.Key)+len(r.Version))}
	e.uvarint(recordV1)
	e.str(r.Source)
	e.str(r.Key)
	e.str(r.Version)
	e.varint(r.Size)
	e.varint(r.MTime)
	e.varint(r.BlockSize)
	e.varint(r.LastAccess)
	e.uvarint(uint64(r.Flags))
	return e.b
}

// UnmarshalObject decodes what MarshalObject encoded.
func UnmarshalObject(b []byte) (ObjectRecord, error) {
	d := decoder{b: b}
	d.version()
	r := ObjectRecord{Source: d.str(), Key: d.str(), Version: d.str()}
	r.Size, r.MTime, r.BlockSize, r.LastAccess = d.varint(), d.varint(), d.varint(), d.varint()
	r.Flags = uint32(d.uvarint())
	if err := d.done(); err != nil {
		return ObjectRecord{}, err
	}
	if r.Size < 0 || r.BlockSize <= 0 {
		return ObjectRecord{}, ErrCorrupt
	}
	return r, nil
}

// MarshalBlock encodes a block presence value (8 bytes).
func MarshalBlock(bi BlockInfo) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, bi.CRC)
	binary.LittleEndian.PutUint32(b[4:], bi.Len)
	return b
}

// UnmarshalBlock decodes a block presence value.
func UnmarshalBlock(b []byte) (BlockInfo, error) {
	if len(b) != 8 {
		return BlockInfo{}, ErrCorrupt
	}
	return BlockInfo{CRC: binary.LittleEndian.Uint32(b), Len: binary.LittleEndian.Uint32(b[4:])}, nil
}

// MarshalEntry encodes an entry.
func MarshalEntry(r EntryRecord) []byte {
	e := encoder{b: make([]byte, 0, 32+len(r.Version))}
	e.uvarint(recordV1)
	e.uvarint(uint64(r.Kind))
	e.varint(r.Size)
	e.varint(r.MTime)
	e.str(r.Version)
	e.varint(r.FetchedAt)
	return e.b
}

// UnmarshalEntry decodes what MarshalEntry encoded.
func UnmarshalEntry(b []byte) (EntryRecord, error) {
	d := decoder{b: b}
	d.version()
	r := EntryRecord{Kind: EntryKind(d.uvarint())}
	r.Size, r.MTime = d.varint(), d.varint()
	r.Version = d.str()
	r.FetchedAt = d.varint()
	if err := d.done(); err != nil {
		return EntryRecord{}, err
	}
	if r.Kind > KindDir || r.Size < 0 {
		return EntryRecord{}, ErrCorrupt
	}
	return r, nil
}

// MarshalDir encodes a listing header.
func MarshalDir(r DirRecord) []byte {
	e := encoder{}
	e.uvarint(recordV1)
	e.varint(r.FetchedAt)
	e.uvarint(boolUint(r.Complete))
	e.varint(r.Entries)
	return e.b
}

// UnmarshalDir decodes what MarshalDir encoded.
func UnmarshalDir(b []byte) (DirRecord, error) {
	d := decoder{b: b}
	d.version()
	r := DirRecord{FetchedAt: d.varint()}
	c := d.uvarint()
	r.Entries = d.varint()
	if err := d.done(); err != nil {
		return DirRecord{}, err
	}
	if c > 1 || r.Entries < 0 {
		return DirRecord{}, ErrCorrupt
	}
	r.Complete = c == 1
	return r, nil
}
