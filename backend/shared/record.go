package shared

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderSize is the length of a record header.
const HeaderSize = 64

// magic starts every unsigned record, signedMagic every signed one; the
// digit is the format version.
var (
	magic       = [8]byte{'S', 'T', 'R', 'A', 'T', 'A', 'S', '1'}
	signedMagic = [8]byte{'S', 'T', 'R', 'A', 'T', 'A', 'K', '1'}
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadRecord: a record in the tier is not the block asked for (foreign
// or misplaced entry, wrong format), fails its CRC32C, or is cut short.
// The reader treats it as a miss.
var ErrBadRecord = errors.New("shared: bad record")

// ErrForgedRecord: a record of a signed tier (Options.Key) whose signature
// does not verify although its CRC32C does: written by someone without
// the key (a forged entry), or with another key. It wraps ErrBadRecord.
var ErrForgedRecord = fmt.Errorf("%w: signature does not match the tier key (forged entry, or written with another key)", ErrBadRecord)

// Header describes one record: which block of which object version it
// holds, and the checksum of its bytes.
//
// Layout (big endian): magic [0:8], block size [8:12], blocks per group
// [12:16], block index [16:24], data length [24:28], CRC32C of the data
// [28:32], identity [32:64]. No field needs a checksum of its own: every
// field but the CRC is compared with what the reader expects, and a
// damaged CRC fails the data check.
//
// A signed record (magic "STRATAK1", see Sealer) has the same layout but
// holds in [32:64], instead of the identity, an HMAC-SHA256 under the
// tier key over bytes [8:32], the identity and the data.
type Header struct {
	BlockSize   uint32
	GroupBlocks uint32
	Block       uint64
	Len         uint32
	CRC         uint32
	// ID is the identity, or for a signed record its MAC.
	ID     ID
	Signed bool
}

// Checksum is the CRC32C (Castagnoli) of b, as records carry it.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// NewHeader describes block b of the object id under layout l.
func NewHeader(id ID, l Layout, b int64, data []byte) Header {
	return Header{BlockSize: uint32(l.BlockSize), GroupBlocks: uint32(l.GroupBlocks),
		Block: uint64(b), Len: uint32(len(data)), CRC: Checksum(data), ID: id}
}

// Encode writes h into dst, which must hold HeaderSize bytes.
func (h Header) Encode(dst []byte) {
	_ = dst[HeaderSize-1]
	copy(dst[0:8], magic[:])
	if h.Signed {
		copy(dst[0:8], signedMagic[:])
	}
	binary.BigEndian.PutUint32(dst[8:12], h.BlockSize)
	binary.BigEndian.PutUint32(dst[12:16], h.GroupBlocks)
	binary.BigEndian.PutUint64(dst[16:24], h.Block)
	binary.BigEndian.PutUint32(dst[24:28], h.Len)
	binary.BigEndian.PutUint32(dst[28:32], h.CRC)
	copy(dst[32:64], h.ID[:])
}

// DecodeHeader parses a record header. It checks only the magic; Expect
// checks the rest against what was asked for.
func DecodeHeader(src []byte) (Header, error) {
	if len(src) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header of %d bytes", ErrBadRecord, len(src))
	}
	m := [8]byte(src[0:8])
	if m != magic && m != signedMagic {
		return Header{}, fmt.Errorf("%w: bad magic %q", ErrBadRecord, src[0:8])
	}
	h := Header{
		Signed:      m == signedMagic,
		BlockSize:   binary.BigEndian.Uint32(src[8:12]),
		GroupBlocks: binary.BigEndian.Uint32(src[12:16]),
		Block:       binary.BigEndian.Uint64(src[16:24]),
		Len:         binary.BigEndian.Uint32(src[24:28]),
		CRC:         binary.BigEndian.Uint32(src[28:32]),
	}
	copy(h.ID[:], src[32:64])
	return h, nil
}

// Expect checks that h describes block b (of length n) of the object id
// under layout l.
func (h Header) Expect(id ID, l Layout, b, n int64) error {
	switch {
	case h.Signed:
		return fmt.Errorf("%w: signed entry, read without the tier key", ErrBadRecord)
	case h.ID != id:
		return fmt.Errorf("%w: foreign entry (identity %x, want %x)", ErrBadRecord, h.ID[:8], id[:8])
	}
	return h.expectPlace(l, b, n)
}

// expectPlace checks the fields every record format shares.
func (h Header) expectPlace(l Layout, b, n int64) error {
	switch {
	case int64(h.BlockSize) != l.BlockSize || int64(h.GroupBlocks) != l.GroupBlocks:
		return fmt.Errorf("%w: layout %d×%d, want %d×%d", ErrBadRecord, h.BlockSize, h.GroupBlocks, l.BlockSize, l.GroupBlocks)
	case h.Block != uint64(b):
		return fmt.Errorf("%w: holds block %d, want %d", ErrBadRecord, h.Block, b)
	case int64(h.Len) != n:
		return fmt.Errorf("%w: %d bytes, want %d", ErrBadRecord, h.Len, n)
	}
	return nil
}

// CheckRecord decodes hdr and checks it and data (len(data) bytes) as the
// unsigned record of block b of id under l.
func CheckRecord(hdr, data []byte, id ID, l Layout, b int64) error {
	return Sealer{}.Check(hdr, data, id, l, b)
}

// AppendRecord appends the unsigned record of block b (data) of id under
// l to dst.
func AppendRecord(dst []byte, id ID, l Layout, b int64, data []byte) []byte {
	return Sealer{}.Append(dst, id, l, b, data)
}
