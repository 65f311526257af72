package integration

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"time"
)

// stream is deterministic test content of any size that is generated as it
// is read, so a 1 GiB file never sits in the test's memory (which the race
// detector would multiply).
type stream struct {
	rng  *rand.ChaCha8
	left int64
}

func newStream(seed uint64, n int64) *stream {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return &stream{rng: rand.NewChaCha8(key), left: n}
}

func (s *stream) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	if _, err := s.rng.Read(p); err != nil {
		return 0, err
	}
	s.left -= int64(len(p))
	return len(p), nil
}

// streamSHA is the sha256 of newStream(seed, n).
func streamSHA(seed uint64, n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, newStream(seed, n)) // neither a hash nor the stream fails
	return hex.EncodeToString(h.Sum(nil))
}

// fileSHA hashes a file by reading it (through the mount when p is there).
func fileSHA(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// writeStream writes n bytes of stream seed to p in 1 MiB writes, like a
// checkpoint writer, and returns how long close took.
func writeStream(p string, seed uint64, n int64) (time.Duration, error) {
	f, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(onlyWriter{f}, newStream(seed, n), buf); err != nil {
		f.Close()
		return 0, err
	}
	start := time.Now()
	err = f.Close()
	return time.Since(start), err
}

// onlyWriter hides ReadFrom, so io.CopyBuffer really writes 1 MiB at a time.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
