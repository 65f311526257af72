package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/strata/backend"
)

// bucketGuard polls key in the bucket for the whole of a test and records
// every content it sees that is not one the writer meant (allowed: sha256
// of each acceptable content; "" allows the key to be absent).
type bucketGuard struct {
	t       *testing.T
	be      backend.Backend
	key     string
	allowed map[string]bool
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	bad     []string
	seen    int
}

func guardBucket(t *testing.T, w backend.Writer, key string, allowed ...string) *bucketGuard {
	g := &bucketGuard{t: t, be: w.(backend.Backend), key: key, allowed: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, a := range allowed {
		g.allowed[a] = true
	}
	go g.run()
	t.Cleanup(g.halt)
	return g
}

func (g *bucketGuard) run() {
	defer close(g.done)
	var last backend.ObjectInfo
	for {
		select {
		case <-g.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		ctx := context.Background()
		info, err := g.be.Stat(ctx, g.key)
		if errors.Is(err, backend.ErrNotExist) {
			if !g.allowed[""] {
				g.record("absent")
			}
			last = backend.ObjectInfo{}
			continue
		}
		if err != nil || (info.Size == last.Size && info.Version == last.Version && info.MTime.Equal(last.MTime)) {
			continue
		}
		last = info
		h := sha256.New()
		if info.Size > 0 {
			r, err := g.be.ReadRange(ctx, g.key, info.Version, 0, info.Size)
			if err != nil {
				continue // replaced meanwhile: the next poll sees the new one
			}
			_, err = io.Copy(h, r)
			r.Close()
			if err != nil {
				continue
			}
		}
		g.mu.Lock()
		g.seen++
		g.mu.Unlock()
		if s := hex.EncodeToString(h.Sum(nil)); !g.allowed[s] {
			g.record(fmt.Sprintf("%d bytes (sha %.12s)", info.Size, s))
		}
	}
}

func (g *bucketGuard) record(what string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bad = append(g.bad, what)
}

func (g *bucketGuard) halt() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

// check stops the guard and fails the test if the bucket ever held an
// object the writer did not mean.
func (g *bucketGuard) check() {
	g.t.Helper()
	g.halt()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) > 0 {
		g.t.Fatalf("the bucket held %d unintended objects at %s, first: %s", len(g.bad), g.key, g.bad[0])
	}
	if g.seen == 0 {
		g.t.Fatalf("the guard never read %s", g.key)
	}
}

// writerHelper is a Python process that writes src to dst in 1 MiB writes
// and, after at bytes, does what (fork: a forked child closes its copy and
// exits, then a spawned child drops its close-on-exec copy at exec; stop:
// prints "stopped" and waits to be killed; closestop: closes its
// descriptor after a dup of it, writes 1 MiB more through the dup, then
// stops as stop does). The parent pauses after each
// step so that a wrong upload would stay in the bucket long enough to see.
const writerHelper = `
import os, sys, time, subprocess
src, dst, at, what = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
data = open(src, "rb").read()
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
off = 0
def write_to(end):
    global off
    while off < end:
        off += os.write(fd, data[off:min(off + (1 << 20), end)])
write_to(at)
if what == "fork":
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.3)
    subprocess.run(["true"], check=True)
    time.sleep(0.3)
elif what == "closestop":
    fd2 = os.dup(fd)
    os.close(fd)
    fd = fd2
    write_to(at + (1 << 20))
if what in ("stop", "closestop"):
    print("stopped", flush=True)
    time.sleep(3600)
write_to(len(data))
os.close(fd)
`

func runWriterHelper(t *testing.T, src, dst string, at int, what string) *exec.Cmd {
	t.Helper()
	return exec.Command("python3", "-c", writerHelper, src, dst, fmt.Sprint(at), what)
}
