package cache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stratafs/strata/cache/index"
)

// StagingDir is where the write path keeps files being written.
func (s *Store) StagingDir() string { return filepath.Join(s.dir, "staging") }

// ReserveStaging accounts n more bytes of staged (written, not yet
// uploaded) data against the cache limit, evicting first if it must.
// With default sizing staged bytes may go past the limit while the disk
// itself has room (limiter.stagingFits); cached objects are then evicted
// in the background to bring the cache back under it. ErrNoSpace means
// the write cannot be accepted.
func (s *Store) ReserveStaging(n int64) error {
	if n <= 0 {
		return nil
	}
	if s.reserve(n) {
		return nil
	}
	// The limit is re-read from the disk at most once a second; space may
	// have been freed since. Look again before refusing a write.
	s.limits.Refresh()
	if s.reserve(n) || s.reserveBeyondLimit(n) {
		return nil
	}
	// Make room now rather than fail a write the evictor could have saved.
	used := s.used.Load()
	s.evict(used + n - s.limits.Limit(used)/100*lowWater)
	if s.reserve(n) || s.reserveBeyondLimit(n) {
		return nil
	}
	s.stats.NoSpace.Add(1)
	return ErrNoSpace
}

// reserveBeyondLimit accounts n staged bytes past the limit if the disk
// can hold them, and has the evictor make up for them.
func (s *Store) reserveBeyondLimit(n int64) bool {
	if !s.limits.stagingFits(n) {
		return false
	}
	s.used.Add(n)
	s.kickEvict()
	return true
}

// ReleaseStaging returns n bytes reserved by ReserveStaging.
func (s *Store) ReleaseStaging(n int64) {
	if n > 0 {
		s.used.Add(-n)
	}
}

func (s *Store) adoptRecord(k ObjectKey) index.ObjectRecord {
	return index.ObjectRecord{
		Source: k.Source, Key: k.Key, Version: k.Version, Size: k.Size, MTime: k.MTime,
		BlockSize: s.opts.BlockSize, LastAccess: s.now().Unix(), Flags: index.FlagLocal,
	}
}

// Adopt makes the complete file at path the cached copy of object k: the
// file moves into the cache (so a checkpoint written through the mount is
// read back without a GET), every block is marked present with its CRC,
// and a previous version of the key is retired. The caller's staging
// reservation of k.Size bytes becomes the object's; on error the caller
// still holds it and the file stays where it was.
func (s *Store) Adopt(k ObjectKey, path string) error {
	id := index.IDFor(k.Source, k.Key, k.Version)
	rec := s.adoptRecord(k)
	crcs, err := blockCRCs(path, rec)
	if err != nil {
		return err
	}
	// An entry for this version may exist (a retry after a crash): drop it.
	if _, ok, _ := s.ix.GetObject(id); ok {
		if !s.deleteObject(id) {
			return fmt.Errorf("cache: adopt %s: version %s is open", k.Key, k.Version)
		}
	}
	dst := s.pathOf(id)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("cache: adopt %s: %w", k.Key, err)
	}
	if err := s.ix.PutObject(id, rec); err != nil {
		return err
	}
	if err := os.Rename(path, dst); err != nil {
		// The record has no blocks yet: failing to forget it leaves an
		// empty object, which reads as a miss. The rename's error matters.
		_, _ = s.ix.DeleteObject(id)
		return fmt.Errorf("cache: adopt %s: %w", k.Key, err)
	}
	bis := make([]index.BlockInfo, len(crcs))
	for i, crc := range crcs {
		bis[i] = index.BlockInfo{CRC: crc, Len: uint32(rec.BlockLen(int64(i)))}
	}
	if err := s.ix.MarkBlocks(id, bis); err != nil {
		return err
	}
	tag := index.TagFor(k.Source)
	if prev, had, err := s.ix.CurrentVersion(tag, k.Key); err == nil && had && prev != id {
		s.replaced(tag, k.Key, prev)
	}
	if err := s.ix.SetCurrentVersion(tag, k.Key, id); err != nil {
		return err
	}
	// Its blocks were checksummed from these very bytes, in this run, as a
	// block written by WriteBlock is: the object is verified, so its first
	// open (torch.load after torch.save) is a passthrough open, with no
	// second read of the whole file.
	if o, err := s.Acquire(k); err == nil {
		o.st.markVerified()
		o.Release()
	}
	return nil
}

// blockCRCs reads a file block by block and returns each block's CRC.
func blockCRCs(path string, rec index.ObjectRecord) ([]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cache: adopt %s: %w", rec.Key, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != rec.Size {
		return nil, fmt.Errorf("cache: adopt %s: file is %d bytes, object %d", rec.Key, sizeOrNeg(fi), rec.Size)
	}
	n := rec.NumBlocks()
	crcs := make([]uint32, n)
	buf := make([]byte, rec.BlockSize)
	for i := range n {
		b := buf[:rec.BlockLen(i)]
		if _, err := io.ReadFull(io.NewSectionReader(f, i*rec.BlockSize, int64(len(b))), b); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("file shrank while adopting")
			}
			return nil, fmt.Errorf("cache: adopt %s: %w", rec.Key, err)
		}
		crcs[i] = CRC(b)
	}
	return crcs, nil
}

func sizeOrNeg(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// ErrIncomplete: Link needs every block of the source cached.
var ErrIncomplete = errors.New("cache: object not fully cached")

// Link makes the complete cached copy of from also the cached copy of to
// (a server-side copy of it: same bytes, new key or version), by a hard
// link and copied block records: nothing is read or fetched. Both count
// against the cache size (conservatively: they share the disk blocks).
func (s *Store) Link(from, to ObjectKey) error {
	fid := index.IDFor(from.Source, from.Key, from.Version)
	tid := index.IDFor(to.Source, to.Key, to.Version)
	rec, ok, err := s.ix.GetObject(fid)
	if err != nil {
		return err
	}
	if !ok || rec.Size != to.Size {
		return ErrIncomplete
	}
	var blocks []index.BlockInfo
	if err := s.ix.Blocks(fid, func(i int64, bi index.BlockInfo) error {
		if i != int64(len(blocks)) {
			return ErrIncomplete
		}
		blocks = append(blocks, bi)
		return nil
	}); err != nil {
		return err
	}
	if int64(len(blocks)) != rec.NumBlocks() {
		return ErrIncomplete
	}
	if _, ok, _ := s.ix.GetObject(tid); ok && !s.deleteObject(tid) {
		return fmt.Errorf("cache: link %s: version %s is open", to.Key, to.Version)
	}
	dst := s.pathOf(tid)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("cache: link %s: %w", to.Key, err)
	}
	if err := os.Link(s.pathOf(fid), dst); err != nil {
		return fmt.Errorf("cache: link %s: %w", to.Key, err)
	}
	nrec := rec
	nrec.Source, nrec.Key, nrec.Version, nrec.MTime, nrec.LastAccess = to.Source, to.Key, to.Version, to.MTime, s.now().Unix()
	if err := s.ix.PutObject(tid, nrec); err != nil {
		os.Remove(dst)
		return err
	}
	for i, bi := range blocks {
		if err := s.ix.MarkBlock(tid, int64(i), bi); err != nil {
			return err
		}
	}
	s.used.Add(to.Size)
	s.kickEvict()
	tag := index.TagFor(to.Source)
	if prev, had, err := s.ix.CurrentVersion(tag, to.Key); err == nil && had && prev != tid {
		s.replaced(tag, to.Key, prev)
	}
	return s.ix.SetCurrentVersion(tag, to.Key, tid)
}

// Forget drops the cached copy of k (its object was deleted); an open
// copy goes when it is closed.
func (s *Store) Forget(k ObjectKey) {
	id := index.IDFor(k.Source, k.Key, k.Version)
	if _, ok, _ := s.ix.GetObject(id); ok {
		s.retire(id)
	}
}
