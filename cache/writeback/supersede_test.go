package writeback

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestSupersedeKeepsTheNewestCommit: commits of one file registered close
// together (appenders closing one after the other) are journaled in any
// order; whichever journals first drops the older ones, never the newest.
// supersedeLocked walked the key's jobs while dropping them, and dropping
// one shifted the slice it walked: the newest commit was dropped and an
// older one uploaded (lines appended to a log went missing).
func TestSupersedeKeepsTheNewestCommit(t *testing.T) {
	for _, n := range []int{2, 3, 4, 6} {
		t.Run(fmt.Sprint(n, " commits"), func(t *testing.T) {
			ctx := context.Background()
			b := newBucket()
			e := openEnv(t, b, b, "", func(o *Options) { o.Mode, o.Delay = Async, time.Hour })
			var jobs []*Job
			var last []byte
			for i := range n {
				last = bytes.Repeat([]byte{byte('a' + i)}, 10*(i+1))
				j, err := e.m.Register("log", e.stageAt(t, "log", last), "", 1, false)
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, j)
			}
			for _, j := range jobs { // the oldest journals first
				if err := e.m.Journal(ctx, j); err != nil {
					t.Fatal(err)
				}
			}
			c, ok := e.m.Content("log")
			if !ok {
				t.Fatal("no content pending for the key: every commit was dropped")
			}
			got, err := io.ReadAll(io.NewSectionReader(c, 0, c.Size()))
			c.Release()
			if err != nil || !bytes.Equal(got, last) {
				t.Fatalf("the pending content is %q (%v), want the newest commit %q", got, err, last)
			}
			if _, err := e.m.WaitAll(ctx); err != nil {
				t.Fatal(err)
			}
			if data, ok := b.get("log"); !ok || !bytes.Equal(data, last) {
				t.Fatalf("the bucket holds %q, want the newest commit %q", data, last)
			}
		})
	}
}
