package fs

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/strata/cache/meta"
)

// TestReadOfADeletedObjectIsStale: a file open on a version that was
// deleted from the bucket since reads its uncached blocks as ESTALE, as a
// changed object does (the README: "If the object changes, reads of that
// handle's uncached blocks fail with ESTALE"). Before the fix read(2)
// returned ENOENT, an errno read(2) never gives, which programs report as
// "No such file or directory" about a file they hold open.
func TestReadOfADeletedObjectIsStale(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 6<<16) // 6 MiB: not fetched whole at open
	f := newTestFS(t, map[string]string{"d/big": big})
	e, st := f.lookup("d/big")
	if st != 0 {
		t.Fatalf("lookup: %v", st)
	}
	var out fuse.OpenOut
	if s := f.raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Flags: syscall.O_RDONLY}, &out); s != fuse.OK {
		t.Fatalf("open: %v", s)
	}
	defer f.raw.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Fh: out.Fh})
	f.be.mu.Lock()
	delete(f.be.objs, "d/big") // deleted in the bucket behind the mount's back
	f.be.mu.Unlock()

	buf := make([]byte, 4096)
	in := &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Fh: out.Fh, Offset: 5 << 20, Size: uint32(len(buf))}
	res, s := f.raw.Read(nil, in, buf)
	if res != nil {
		res.Done()
	}
	if s != fuse.Status(syscall.ESTALE) {
		t.Fatalf("read of an uncached block of a deleted object: %v, want ESTALE", s)
	}
}

// TestStaleReadMakesTheNameLookedUpAgain: once a read finds that the
// object changed in the bucket (ESTALE), the next lookup of its name asks
// the bucket, within the metadata TTL, so that a new open reads the new
// version instead of failing with ESTALE until the TTL runs out. Before,
// every open of the name kept failing for up to --metadata-ttl (a minute
// by default). Under --metadata-ttl indefinite the mount keeps the version
// it knows, as the README says, until `strata refresh`.
func TestStaleReadMakesTheNameLookedUpAgain(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 6<<16) // 6 MiB: not fetched whole at open
	for _, c := range []struct {
		name       string
		indefinite bool
	}{{"ttl", false}, {"indefinite", true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newTestFSMeta(t, map[string]string{"d/big": big}, func(o *Options) {
				if c.indefinite {
					o.TTL = meta.Indefinite
				}
			}, func(o *meta.Options) {
				if c.indefinite {
					o.TTL = meta.Indefinite
				}
			})
			e, st := f.lookup("d/big")
			if st != 0 {
				t.Fatalf("lookup: %v", st)
			}
			fh := f.open(e.NodeId, syscall.O_RDONLY)
			changed := strings.Repeat("x", 7<<20)
			f.be.set("d/big", []byte(changed)) // replaced in the bucket behind the mount's back
			if _, s := f.read(e.NodeId, fh, 5<<20, 4096); s != syscall.ESTALE {
				t.Fatalf("read of an uncached block of a changed object: %v, want ESTALE", s)
			}
			f.release(e.NodeId, fh)

			var again fuse.EntryOut
			deadline := time.Now().Add(5 * time.Second)
			for {
				if again, st = f.lookup("d/big"); st != 0 {
					t.Fatalf("lookup after the stale read: %v", st)
				}
				if again.Attr.Size == uint64(len(changed)) || c.indefinite || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			switch {
			case c.indefinite && again.Attr.Size != uint64(len(big)):
				t.Fatalf("under indefinite the name was looked up again: size %d, want the known %d", again.Attr.Size, len(big))
			case !c.indefinite && (again.Attr.Size != uint64(len(changed)) || again.NodeId == e.NodeId):
				t.Fatalf("lookup after the stale read: inode %d size %d, want a new inode of size %d", again.NodeId, again.Attr.Size, len(changed))
			}
		})
	}
}
