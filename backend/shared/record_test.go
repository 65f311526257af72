package shared

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	id := Identity("s3://b", "k", "v")
	l := Layout{BlockSize: 16, GroupBlocks: 4}
	data := []byte("0123456789abcdef")
	rec := AppendRecord(nil, id, l, 5, data)
	if len(rec) != HeaderSize+len(data) {
		t.Fatalf("record of %d bytes", len(rec))
	}
	h, err := DecodeHeader(rec[:HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	want := Header{BlockSize: 16, GroupBlocks: 4, Block: 5, Len: 16, CRC: Checksum(data), ID: id}
	if h != want {
		t.Fatalf("decoded %+v, want %+v", h, want)
	}
	var again [HeaderSize]byte
	h.Encode(again[:])
	if !bytes.Equal(again[:], rec[:HeaderSize]) {
		t.Fatal("re-encoding differs")
	}
	if err := CheckRecord(rec[:HeaderSize], rec[HeaderSize:], id, l, 5); err != nil {
		t.Fatalf("good record rejected: %v", err)
	}
}

// TestHeaderGolden pins the on-the-wire header: other nodes (and other
// versions of Strata) read it. CRC32C("abc") is the well-known 364b3fb7.
func TestHeaderGolden(t *testing.T) {
	id := Identity("s3://b@127.0.0.1:9000", "data/x.bin", "etag1")
	var h [HeaderSize]byte
	NewHeader(id, NewLayout(1<<20, 1<<20), 7, []byte("abc")).Encode(h[:])
	const golden = "5354524154415331" + "00100000" + "00000001" + "0000000000000007" + "00000003" + "364b3fb7" +
		"41b72ad8cb906f6e77e369fa09d9c60b2899a5089eba6833d4653294fdee0982"
	if got := hex.EncodeToString(h[:]); got != golden {
		t.Fatalf("header\n%s, want\n%s", got, golden)
	}
}

func TestCheckRecordRejects(t *testing.T) {
	id := Identity("s3://b", "k", "v")
	l := Layout{BlockSize: 16, GroupBlocks: 4}
	data := []byte("0123456789abcdef")
	good := AppendRecord(nil, id, l, 5, data)
	for _, c := range []struct {
		name  string
		mut   func(rec []byte) []byte
		id    ID
		l     Layout
		block int64
	}{
		{"foreign identity", nil, Identity("s3://b", "k", "v2"), l, 5},
		{"other block", nil, id, l, 6},
		{"other block size", nil, id, Layout{BlockSize: 32, GroupBlocks: 4}, 5},
		{"other group size", nil, id, Layout{BlockSize: 16, GroupBlocks: 2}, 5},
		{"bad magic", func(r []byte) []byte { r[0] ^= 1; return r }, id, l, 5},
		{"data bit flipped", func(r []byte) []byte { r[HeaderSize+3] ^= 0x10; return r }, id, l, 5},
		{"crc field flipped", func(r []byte) []byte { r[30] ^= 1; return r }, id, l, 5},
		{"length field changed", func(r []byte) []byte { r[27] = 15; return r }, id, l, 5},
		{"identity byte flipped", func(r []byte) []byte { r[40] ^= 1; return r }, id, l, 5},
		{"truncated data", func(r []byte) []byte { return r[:len(r)-1] }, id, l, 5},
		{"short header", func(r []byte) []byte { return r[:HeaderSize-1] }, id, l, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := bytes.Clone(good)
			if c.mut != nil {
				rec = c.mut(rec)
			}
			hdr, body := rec, []byte(nil)
			if len(rec) >= HeaderSize {
				hdr, body = rec[:HeaderSize], rec[HeaderSize:]
			}
			err := CheckRecord(hdr, body, c.id, c.l, c.block)
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("CheckRecord = %v, want ErrBadRecord", err)
			}
		})
	}
}

// FuzzRecord: no input panics the decoder, and a record is accepted only
// if it is byte for byte the encoding of the block asked for (signed, for
// a signed check).
func FuzzRecord(f *testing.F) {
	id := Identity("s3://b", "k", "v")
	l := Layout{BlockSize: 16, GroupBlocks: 4}
	good := AppendRecord(nil, id, l, 5, []byte("0123456789abcdef"))
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add(AppendRecord(nil, id, l, 5, []byte("short")))
	f.Add([]byte("STRATAS1"))
	seal, err := NewSealer([]byte("fuzzing key, 16+ bytes"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seal.Append(nil, id, l, 5, []byte("0123456789abcdef")))
	f.Fuzz(func(t *testing.T, rec []byte) {
		if h, err := DecodeHeader(rec); err == nil {
			var again [HeaderSize]byte
			h.Encode(again[:])
			if !bytes.Equal(again[:], rec[:HeaderSize]) {
				t.Fatalf("decode/encode not inverse: %x vs %x", rec[:HeaderSize], again)
			}
		}
		if len(rec) < HeaderSize {
			if CheckRecord(rec, nil, id, l, 5) == nil {
				t.Fatal("accepted a record shorter than a header")
			}
			return
		}
		hdr, data := rec[:HeaderSize], rec[HeaderSize:]
		if CheckRecord(hdr, data, id, l, 5) == nil && !bytes.Equal(rec, AppendRecord(nil, id, l, 5, data)) {
			t.Fatalf("accepted a record that is not the encoding of block 5: %x", rec)
		}
		if seal.Check(hdr, data, id, l, 5) == nil && !bytes.Equal(rec, seal.Append(nil, id, l, 5, data)) {
			t.Fatalf("signed check accepted a record that is not the signed encoding of block 5: %x", rec)
		}
	})
}
