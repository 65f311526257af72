package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/fs"
	"github.com/stratafs/strata/internal/config"
)

// The control socket: a running mount owns its cache directory (one
// process holds the index), so `strata warm` and `strata cache
// stats|verify|gc` ask the mount to do the work through
// <cache-dir>/control.sock, mode 0600, accepting only the mount's own user
// (or root) by SO_PEERCRED.
//
// Protocol (version 1), newline-delimited JSON:
//
//	client -> {"op":"warm"|"stats"|"verify"|"gc"|"refresh"|"ping", ...Request}
//	server -> {"type":"hello","hello":{...}}        first, always
//	server -> {"type":"progress","progress":{...}}  zero or more (warm, verify)
//	server -> {"type":"result","result":{...}}      last, on success
//	server -> {"type":"error","error":"..."}        last, on failure
//
// Closing the connection cancels the work (Ctrl-C on `strata warm`).

const (
	// SockName is the socket's name in the cache directory.
	SockName = "control.sock"
	// Protocol is the version of the protocol this package speaks.
	Protocol = 1
	// maxRequest bounds a request (a --from-list of a million keys fits).
	maxRequest = 256 << 20
)

// Request is what a client asks.
type Request struct {
	Op string `json:"op"`
	// Warm: the source as the client named it, its endpoint, and what to
	// warm under it.
	Source      string   `json:"source,omitempty"`
	Endpoint    string   `json:"endpoint,omitempty"`
	Prefix      string   `json:"prefix,omitempty"`
	Paths       []string `json:"paths,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
}

// Hello introduces the mount.
type Hello struct {
	Protocol   int    `json:"protocol"`
	PID        int    `json:"pid"`
	Version    string `json:"version"`
	Source     string `json:"source"`
	Mountpoint string `json:"mountpoint"`
}

// controlMsg is one server line.
type controlMsg struct {
	Type     string          `json:"type"`
	Hello    *Hello          `json:"hello,omitempty"`
	Progress json.RawMessage `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Handler does the work of one request: ops other than "ping", which the
// server answers itself. progress streams a progress message; the result
// is sent as the final answer. An op it does not know is UnknownOp(op).
type Handler func(ctx context.Context, req Request, progress func(any)) (any, error)

// Server serves one mount's socket.
type Server struct {
	hello   Hello
	handler Handler
	log     *slog.Logger
	ln      *net.UnixListener
	dirFd   *os.File // keeps a long cache dir reachable by /proc/self/fd (see sockAddr)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// sockAddr is the address of dir's control socket. Unix socket paths are
// limited to 107 bytes; a longer one is reached through an open
// descriptor of dir (/proc/self/fd/N/control.sock), which the caller
// closes when done.
func sockAddr(dir string) (string, *os.File, error) {
	p := filepath.Join(dir, SockName)
	if len(p) < 100 {
		return p, nil, nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), SockName), d, nil
}

// Listen serves dir's control socket (mode 0600, the caller's own user
// and root only) until Close. The caller holds the cache dir's lock, so a
// socket file left there belongs to a dead mount and is replaced. hello
// names the mount (Protocol, PID and Version are filled in here).
func Listen(dir string, hello Hello, h Handler, log *slog.Logger) (*Server, error) {
	addr, dirFd, err := sockAddr(dir)
	if err != nil {
		return nil, err
	}
	// We hold the cache lock: a socket left here belongs to a dead mount.
	os.Remove(addr)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		closeFile(dirFd)
		return nil, err
	}
	if err := os.Chmod(addr, 0o600); err != nil {
		ln.Close()
		closeFile(dirFd)
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	hello.Protocol, hello.PID, hello.Version = Protocol, os.Getpid(), config.Version
	c := &Server{hello: hello, handler: h, log: log, ln: ln, dirFd: dirFd, ctx: ctx, cancel: cancel}
	c.wg.Add(1)
	go c.serve()
	return c, nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// Close stops accepting, cancels work in progress and waits for it.
func (c *Server) Close() {
	c.cancel()
	c.ln.Close() // also removes the socket file
	c.wg.Wait()
	closeFile(c.dirFd)
}

func (c *Server) serve() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Warn("control socket: accept", "err", err)
			}
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer conn.Close()
			c.handle(conn)
		}()
	}
}

// peerAllowed accepts the mount's own user and root.
func peerAllowed(conn *net.UnixConn) (int, bool) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return -1, false
	}
	var cred *unix.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cerr != nil || cred == nil {
		return -1, false
	}
	return int(cred.Uid), cred.Uid == 0 || int(cred.Uid) == os.Getuid()
}

// reply writes server lines; safe for concurrent use by a job's progress
// reporter and its final answer.
type reply struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
}

func (r *reply) send(m controlMsg) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.enc.Encode(m)
	}
	return r.err
}

func (r *reply) progress(v any) {
	if b, err := json.Marshal(v); err == nil {
		_ = r.send(controlMsg{Type: "progress", Progress: b}) // kept in r.err: see handle
	}
}

func (c *Server) handle(conn *net.UnixConn) {
	if uid, ok := peerAllowed(conn); !ok {
		c.log.Warn("control socket: refused a connection from another user", "uid", uid)
		return
	}
	rd := bufio.NewReader(io.LimitReader(conn, maxRequest))
	var req Request
	if err := json.NewDecoder(rd).Decode(&req); err != nil {
		return
	}
	// A failed send means the client went away: the reader below cancels
	// the job, so send's error (kept in out.err) is not checked.
	out := &reply{enc: json.NewEncoder(conn)}
	hello := c.hello
	_ = out.send(controlMsg{Type: "hello", Hello: &hello})
	// The client sends nothing more: EOF (or an error) on the connection
	// means it went away, which cancels the job.
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, conn) // its end, EOF or error, is the signal
		cancel()
	}()
	start := time.Now()
	result, err := c.dispatch(ctx, req, out)
	if err != nil {
		c.log.Info("control: request failed", "op", req.Op, "err", err)
		_ = out.send(controlMsg{Type: "error", Error: err.Error()})
		return
	}
	b, err := json.Marshal(result)
	if err != nil {
		_ = out.send(controlMsg{Type: "error", Error: err.Error()})
		return
	}
	if req.Op != "ping" && req.Op != "stats" {
		c.log.Info("control: done", "op", req.Op, "took", time.Since(start).Round(time.Millisecond).String())
	}
	_ = out.send(controlMsg{Type: "result", Result: b})
}

// ErrUnknownOp is the answer to an op the mount does not know.
var ErrUnknownOp = errors.New("unknown control operation")

// UnknownOp is the error a Handler returns for an op it does not know.
func UnknownOp(op string) error {
	return fmt.Errorf("%w %q (this mount speaks protocol %d)", ErrUnknownOp, op, Protocol)
}

func (c *Server) dispatch(ctx context.Context, req Request, out *reply) (any, error) {
	if req.Op == "ping" {
		return struct{}{}, nil
	}
	return c.handler(ctx, req, out.progress)
}

// RefreshReply is the answer to "refresh".
type RefreshReply struct {
	Results []fs.RefreshResult `json:"results"`
}
