package index

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentJournalEntriesKeepTheirOwnSequence: uploads committed at
// the same moment (a training job's workers each closing a file) are
// journaled concurrently. The sequence number was read and incremented in
// a transaction, and the index runs without conflict detection, so two
// commits could take the same number: the second entry replaced the
// first, whose upload a kill -9 then lost (found by
// TestRandomCallsMatchLocalDisk, seed 36: a file created and closed right
// before the kill was gone after the restart), and the first upload's
// completion deleted the second's entry.
func TestConcurrentJournalEntriesKeepTheirOwnSequence(t *testing.T) {
	ix := openTemp(t, t.TempDir())
	defer ix.Close()
	const n = 64
	var wg sync.WaitGroup
	seqs := make([]uint64, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq, err := ix.AppendUpload(UploadRecord{Source: "s", Key: fmt.Sprintf("k%d", i), Staging: fmt.Sprintf("st%d", i)})
			if err != nil {
				t.Error(err)
			}
			seqs[i] = seq
		}()
	}
	wg.Wait()
	seen := map[uint64]int{}
	for i, s := range seqs {
		if j, dup := seen[s]; dup {
			t.Errorf("uploads %d and %d were both journaled as %d", j, i, s)
		}
		seen[s] = i
	}
	found := 0
	if err := ix.ScanUploads(func(uint64, UploadRecord, error) error { found++; return nil }); err != nil {
		t.Fatal(err)
	}
	if found != n {
		t.Errorf("the journal holds %d entries after %d concurrent commits", found, n)
	}
}
