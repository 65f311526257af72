package shared

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// MinKeyLen is the shortest tier key NewSealer accepts.
const MinKeyLen = 16

// sealDomain starts every record MAC's input, so the key signs nothing
// else by accident.
const sealDomain = "strata-shared-record/1\x00"

// Sealer writes and checks records.
//
// The zero Sealer writes unsigned records, checked by identity, place and
// CRC32C: that catches corrupt, truncated, stale and misplaced entries,
// but not a deliberate forgery, since anyone who can write the tier can
// compute the identity and the CRC32C of other bytes. A Sealer with a key
// signs each record with HMAC-SHA256 over its header fields, the identity
// of the object version (source, key, ETag or generation) and the data,
// so only a holder of the key can write a record a reader accepts.
type Sealer struct {
	key []byte
}

// NewSealer returns the Sealer signing with key (at least MinKeyLen
// bytes); a nil or empty key gives the unsigned Sealer.
func NewSealer(key []byte) (Sealer, error) {
	if len(key) == 0 {
		return Sealer{}, nil
	}
	if len(key) < MinKeyLen {
		return Sealer{}, fmt.Errorf("%w: tier key of %d bytes (at least %d)", errOptions, len(key), MinKeyLen)
	}
	return Sealer{key: append([]byte(nil), key...)}, nil
}

// Signed reports whether records are signed.
func (s Sealer) Signed() bool { return len(s.key) > 0 }

// Tag is a short public name of the key: signed entries live under it, so
// tiers written with different keys (or none) never overwrite each
// other's entries. It reveals nothing usable about a random key.
func (s Sealer) Tag() string {
	h := sha256.Sum256(append([]byte("strata-shared-keytag/1\x00"), s.key...))
	return hex.EncodeToString(h[:8])
}

// Header encodes into dst (HeaderSize bytes) the header of block b (data)
// of id under l.
func (s Sealer) Header(dst []byte, id ID, l Layout, b int64, data []byte) {
	h := NewHeader(id, l, b, data)
	if s.Signed() {
		h.Signed = true
		h.Encode(dst) // fields [8:32] first: the MAC covers them
		h.ID = s.mac(dst, id, data)
	}
	h.Encode(dst)
}

// Append appends the record of block b (data) of id under l to dst.
func (s Sealer) Append(dst []byte, id ID, l Layout, b int64, data []byte) []byte {
	var hdr [HeaderSize]byte
	s.Header(hdr[:], id, l, b, data)
	return append(append(dst, hdr[:]...), data...)
}

// Check decodes hdr and checks it and data (len(data) bytes) as the record
// of block b of id under l. Every failure is an ErrBadRecord; a record of
// a signed tier whose bytes are intact (their CRC32C matches) but whose
// signature does not verify, or that is not signed at all, is an
// ErrForgedRecord.
func (s Sealer) Check(hdr, data []byte, id ID, l Layout, b int64) error {
	h, err := DecodeHeader(hdr)
	if err != nil {
		return err
	}
	n := int64(len(data))
	if !s.Signed() {
		err = h.Expect(id, l, b, n)
	} else {
		err = h.expectPlace(l, b, n)
	}
	if err != nil {
		return err
	}
	if c := Checksum(data); c != h.CRC {
		return fmt.Errorf("%w: CRC32C %08x, header says %08x", ErrBadRecord, c, h.CRC)
	}
	if !s.Signed() {
		return nil
	}
	if !h.Signed {
		return fmt.Errorf("%w: the entry is not signed", ErrForgedRecord)
	}
	if want := s.mac(hdr, id, data); !hmac.Equal(want[:], h.ID[:]) {
		return ErrForgedRecord
	}
	return nil
}

// mac signs header fields [8:32], the identity and the data.
func (s Sealer) mac(hdr []byte, id ID, data []byte) ID {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(sealDomain))
	m.Write(hdr[8:32])
	m.Write(id[:])
	m.Write(data)
	var out ID
	m.Sum(out[:0])
	return out
}
