package shared

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Namespace is the first element of every shared object's name after the
// prefix; a new record format gets a new namespace, so formats never mix.
const Namespace = "strata1/"

// MarkerName is the object written at mount to prove the tier is writable,
// under PREFIX + Namespace.
const MarkerName = "_strata_shared_cache"

// ID is the identity of one object version: sha256 over the source, the
// key and the version. It is in every record's header.
type ID [32]byte

// Identity returns the ID of (source, key, version). Each part is length
// prefixed, so no two distinct triples share an input.
func Identity(source, key, version string) ID {
	h := sha256.New()
	h.Write([]byte("strata-shared-identity/1\x00"))
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{source, key, version} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	var id ID
	h.Sum(id[:0])
	return id
}

// SourceTag is the short hash naming a source's directory in the tier.
func SourceTag(source string) string {
	s := sha256.Sum256([]byte("strata-shared-source/1\x00" + source))
	return hex.EncodeToString(s[:8])
}

// Layout maps an object's blocks onto shared objects.
type Layout struct {
	// BlockSize is the cache block size in bytes (the fetcher asks for
	// whole blocks, the last of an object possibly short).
	BlockSize int64
	// GroupBlocks is the number of blocks per shared object (at least 1).
	GroupBlocks int64
}

// NewLayout returns the layout for a block size and a target group size:
// as many whole blocks as fit in groupSize, at least one.
func NewLayout(blockSize, groupSize int64) Layout {
	return Layout{BlockSize: blockSize, GroupBlocks: max(1, groupSize/blockSize)}
}

// Group returns the group holding block b.
func (l Layout) Group(b int64) int64 { return b / l.GroupBlocks }

// FirstBlock returns the first block of group g.
func (l Layout) FirstBlock(g int64) int64 { return g * l.GroupBlocks }

// Stride is the length of a full record.
func (l Layout) Stride() int64 { return HeaderSize + l.BlockSize }

// RecordOffset is where block b's record starts in its group's object.
func (l Layout) RecordOffset(b int64) int64 { return (b % l.GroupBlocks) * l.Stride() }

// Span returns the byte range of the records of blocks [from, to] (one
// group), the last block being lastLen bytes long.
func (l Layout) Span(from, to, lastLen int64) (off, n int64) {
	off = l.RecordOffset(from)
	return off, (to-from)*l.Stride() + HeaderSize + lastLen
}

// Keys names the shared objects of one source under one prefix.
type Keys struct {
	prefix string // "" or ending in "/", then Namespace and the source tag
	layout Layout
}

// NewKeys returns the naming for source under prefix ("" or ending in
// "/") with layout l.
func NewKeys(prefix, source string, l Layout) Keys {
	return Keys{prefix: prefix + Namespace + SourceTag(source) + "/", layout: l}
}

// Object returns the name of group g of the object with identity id.
func (k Keys) Object(id ID, g int64) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + 80)
	b.WriteString(k.prefix)
	b.WriteString(hex.EncodeToString(id[:16]))
	fmt.Fprintf(&b, "/b%d-g%d/%010d", k.layout.BlockSize, k.layout.GroupBlocks, g)
	return b.String()
}

// NewSignedKeys returns the naming for the records of source signed by
// seal: under prefix, the namespace and "key-<seal.Tag()>/", so entries
// signed with different keys, and unsigned ones, never share a name.
func NewSignedKeys(prefix, source string, l Layout, seal Sealer) Keys {
	if !seal.Signed() {
		return NewKeys(prefix, source, l)
	}
	return Keys{prefix: prefix + Namespace + "key-" + seal.Tag() + "/" + SourceTag(source) + "/", layout: l}
}

// MarkerKey is the name of the writability marker under prefix.
func MarkerKey(prefix string) string { return prefix + Namespace + MarkerName }

// ParseObject splits a shared object name made by Object into its parts;
// ok is false for any other name. Tests and tools use it to find what an
// entry holds.
func ParseObject(name string) (idPrefix string, l Layout, g int64, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) < 5 {
		return "", Layout{}, 0, false
	}
	parts = parts[len(parts)-3:]
	bs, gb, found := strings.Cut(strings.TrimPrefix(parts[1], "b"), "-g")
	if !found || len(parts[0]) != 32 {
		return "", Layout{}, 0, false
	}
	var err1, err2, err3 error
	l.BlockSize, err1 = strconv.ParseInt(bs, 10, 64)
	l.GroupBlocks, err2 = strconv.ParseInt(gb, 10, 64)
	g, err3 = strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || l.BlockSize <= 0 || l.GroupBlocks <= 0 || g < 0 {
		return "", Layout{}, 0, false
	}
	return parts[0], l, g, true
}
