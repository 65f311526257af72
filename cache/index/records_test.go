package index

import (
	"errors"
	"testing"
)

func TestObjectRecordRoundTrip(t *testing.T) {
	tests := []ObjectRecord{
		{Source: "s3://b", Key: "a/b", Version: "etag", Size: 0, BlockSize: 1 << 20},
		{Source: "gs://x@http://127.0.0.1:1", Key: "ünï cødé/..//x", Version: "1700000000000", Size: 1 << 40, MTime: -5, BlockSize: 4096, LastAccess: 1e9, Flags: FlagLocal},
	}
	for _, want := range tests {
		got, err := UnmarshalObject(MarshalObject(want))
		if err != nil || got != want {
			t.Fatalf("round trip %+v: got %+v, %v", want, got, err)
		}
	}
}

func TestDecodersRejectGarbage(t *testing.T) {
	good := MarshalObject(ObjectRecord{Source: "s", Key: "k", Version: "v", Size: 10, BlockSize: 4})
	cases := map[string][]byte{
		"empty":       nil,
		"bad version": append([]byte{9}, good[1:]...),
		"truncated":   good[:len(good)-1],
		"trailing":    append(append([]byte{}, good...), 0),
		"zero block":  MarshalObject(ObjectRecord{Size: 1, BlockSize: 0}),
	}
	for name, b := range cases {
		if _, err := UnmarshalObject(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: want ErrCorrupt, got %v", name, err)
		}
	}
	if _, err := UnmarshalBlock([]byte{1, 2, 3}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short block: %v", err)
	}
	if _, err := UnmarshalEntry([]byte{1, 7, 0, 0, 0, 0}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad kind: %v", err)
	}
	if _, err := UnmarshalDir([]byte{1, 0, 5, 0}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad complete flag: %v", err)
	}
}

func TestBlockMath(t *testing.T) {
	tests := []struct {
		size, bs, n, lastLen int64
	}{
		{0, 4, 0, 0}, {1, 4, 1, 1}, {4, 4, 1, 4}, {5, 4, 2, 1}, {8, 4, 2, 4},
	}
	for _, tc := range tests {
		r := ObjectRecord{Size: tc.size, BlockSize: tc.bs}
		if got := r.NumBlocks(); got != tc.n {
			t.Errorf("NumBlocks(%d,%d)=%d want %d", tc.size, tc.bs, got, tc.n)
		}
		if tc.n > 0 {
			if got := r.BlockLen(tc.n - 1); got != tc.lastLen {
				t.Errorf("last BlockLen(%d,%d)=%d want %d", tc.size, tc.bs, got, tc.lastLen)
			}
		}
		if got := r.BlockLen(tc.n); got != 0 {
			t.Errorf("BlockLen past end = %d", got)
		}
	}
}

func FuzzUnmarshalObject(f *testing.F) {
	f.Add(MarshalObject(ObjectRecord{Source: "s3://b", Key: "k", Version: "v", Size: 3, BlockSize: 1}))
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := UnmarshalObject(b)
		if err != nil {
			return
		}
		r2, err := UnmarshalObject(MarshalObject(r))
		if err != nil || r2 != r {
			t.Fatalf("re-encode mismatch: %+v vs %+v (%v)", r, r2, err)
		}
	})
}

func FuzzUnmarshalEntry(f *testing.F) {
	f.Add(MarshalEntry(EntryRecord{Kind: KindFile, Size: 5, Version: "x"}))
	f.Add(MarshalDir(DirRecord{FetchedAt: 5, Complete: true, Entries: 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := UnmarshalEntry(b); err == nil {
			if e2, err := UnmarshalEntry(MarshalEntry(e)); err != nil || e2 != e {
				t.Fatalf("entry re-encode mismatch")
			}
		}
		if d, err := UnmarshalDir(b); err == nil {
			if d2, err := UnmarshalDir(MarshalDir(d)); err != nil || d2 != d {
				t.Fatalf("dir re-encode mismatch")
			}
		}
		_, _ = UnmarshalBlock(b)
	})
}

func TestUploadRecordRoundTrip(t *testing.T) {
	r := UploadRecord{Source: "s3://b", Key: "ckpt/step_1.pt", Staging: "abc", Size: 1 << 33, MTime: 5,
		BaseVersion: "\x00absent", ThenDelete: "ckpt/tmp", ThenDeleteVersion: "e1", State: UploadFailed, Attempts: 3, LastError: "boom", Created: 9}
	got, err := UnmarshalUpload(MarshalUpload(r))
	if err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	// A record journaled unflushed carries its boot; one without it is a
	// record as earlier versions wrote it.
	r.UnsyncedBoot = "0e5e5bd5-3c1b-4d7e-9a55-0b9f1f2f7a10"
	if got, err := UnmarshalUpload(MarshalUpload(r)); err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	r.UnsyncedBoot, r.Follows = "", true
	if got, err := UnmarshalUpload(MarshalUpload(r)); err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	// A passthrough-written file records its staged mtime, alone or not.
	r.StagedMTime = 1_764_000_000_123_456_789
	if got, err := UnmarshalUpload(MarshalUpload(r)); err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	r.Follows = false
	if got, err := UnmarshalUpload(MarshalUpload(r)); err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	// A deleted file's upload in flight: to take down, not to send.
	r.State = UploadOvertaken
	if got, err := UnmarshalUpload(MarshalUpload(r)); err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := UnmarshalUpload(MarshalUpload(r)[:5]); err == nil {
		t.Fatal("truncated record accepted")
	}
	r.State = UploadOvertaken + 1
	if _, err := UnmarshalUpload(MarshalUpload(r)); err == nil {
		t.Fatal("a record of an unknown state accepted")
	}
}

func FuzzUnmarshalUpload(f *testing.F) {
	f.Add(MarshalUpload(UploadRecord{Key: "k", Size: 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := UnmarshalUpload(b)
		if err != nil {
			return
		}
		if r2, err := UnmarshalUpload(MarshalUpload(r)); err != nil || r2 != r {
			t.Fatal("re-encode mismatch")
		}
	})
}
