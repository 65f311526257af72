package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/strata/cache"
	"github.com/stratafs/strata/internal/config"
	"github.com/stratafs/strata/internal/warm"
)

// The control socket: a running mount owns its cache directory (one
// process holds the index), so `strata warm` and `strata cache
// stats|verify|gc` ask the mount to do the work through
// <cache-dir>/control.sock, mode 0600, accepting only the mount's own user
// (or root) by SO_PEERCRED.
//
// Protocol (version 1), newline-delimited JSON:
//
//	client -> {"op":"warm"|"stats"|"verify"|"gc"|"refresh"|"ping", ...controlRequest}
//	server -> {"type":"hello","hello":{...}}        first, always
//	server -> {"type":"progress","progress":{...}}  zero or more (warm, verify)
//	server -> {"type":"result","result":{...}}      last, on success
//	server -> {"type":"error","error":"..."}        last, on failure
//
// Closing the connection cancels the work (Ctrl-C on `strata warm`).

const (
	controlSockName = "control.sock"
	controlProtocol = 1
	// maxRequest bounds a request (a --from-list of a million keys fits).
	maxRequest = 256 << 20
)

// controlRequest is what a client asks.
type controlRequest struct {
	Op string `json:"op"`
	// Warm: the source as the client named it, its endpoint, and what to
	// warm under it.
	Source      string   `json:"source,omitempty"`
	Endpoint    string   `json:"endpoint,omitempty"`
	Prefix      string   `json:"prefix,omitempty"`
	Paths       []string `json:"paths,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
}

// controlHello introduces the mount.
type controlHello struct {
	Protocol   int    `json:"protocol"`
	PID        int    `json:"pid"`
	Version    string `json:"version"`
	Source     string `json:"source"`
	Mountpoint string `json:"mountpoint"`
}

// controlMsg is one server line.
type controlMsg struct {
	Type     string          `json:"type"`
	Hello    *controlHello   `json:"hello,omitempty"`
	Progress json.RawMessage `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// controlServer serves one mount's socket.
type controlServer struct {
	s      *server
	ln     *net.UnixListener
	dirFd  *os.File // keeps a long cache dir reachable by /proc/self/fd (see sockAddr)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sockAddr is the address of dir's control socket. Unix socket paths are
// limited to 107 bytes; a longer one is reached through an open
// descriptor of dir (/proc/self/fd/N/control.sock), which the caller
// closes when done.
func sockAddr(dir string) (string, *os.File, error) {
	p := filepath.Join(dir, controlSockName)
	if len(p) < 100 {
		return p, nil, nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), controlSockName), d, nil
}

func startControl(s *server) (*controlServer, error) {
	addr, dirFd, err := sockAddr(s.cfg.CacheDir)
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
	c := &controlServer{s: s, ln: ln, dirFd: dirFd, ctx: ctx, cancel: cancel}
	c.wg.Add(1)
	go c.serve()
	return c, nil
}

func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// close stops accepting, cancels work in progress and waits for it.
func (c *controlServer) close() {
	c.cancel()
	c.ln.Close() // also removes the socket file
	c.wg.Wait()
	closeFile(c.dirFd)
}

func (c *controlServer) serve() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			if c.ctx.Err() == nil {
				c.s.log.Warn("control socket: accept", "err", err)
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

func (c *controlServer) handle(conn *net.UnixConn) {
	s := c.s
	if uid, ok := peerAllowed(conn); !ok {
		s.log.Warn("control socket: refused a connection from another user", "uid", uid)
		return
	}
	rd := bufio.NewReader(io.LimitReader(conn, maxRequest))
	var req controlRequest
	if err := json.NewDecoder(rd).Decode(&req); err != nil {
		return
	}
	// A failed send means the client went away: the reader below cancels
	// the job, so send's error (kept in out.err) is not checked.
	out := &reply{enc: json.NewEncoder(conn)}
	_ = out.send(controlMsg{Type: "hello", Hello: &controlHello{
		Protocol: controlProtocol, PID: os.Getpid(), Version: config.Version, Source: s.src.String(), Mountpoint: s.mnt,
	}})
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
		s.log.Info("control: request failed", "op", req.Op, "err", err)
		_ = out.send(controlMsg{Type: "error", Error: err.Error()})
		return
	}
	b, err := json.Marshal(result)
	if err != nil {
		_ = out.send(controlMsg{Type: "error", Error: err.Error()})
		return
	}
	if req.Op != "ping" && req.Op != "stats" {
		s.log.Info("control: done", "op", req.Op, "took", time.Since(start).Round(time.Millisecond).String())
	}
	_ = out.send(controlMsg{Type: "result", Result: b})
}

var errUnknownOp = errors.New("unknown control operation")

func (c *controlServer) dispatch(ctx context.Context, req controlRequest, out *reply) (any, error) {
	s := c.s
	switch req.Op {
	case "ping":
		return struct{}{}, nil
	case "stats":
		return liveStats(s)
	case "warm":
		job, err := warmJobForMount(s, req)
		if err != nil {
			return nil, err
		}
		s.log.Info("control: warm", "source", req.Source, "prefix", job.Req.Prefix, "paths", len(job.Req.Paths))
		return job.Run(ctx, func(p warm.Progress) { out.progress(p) })
	case "verify":
		res, err := verifyStore(ctx, s.store, 4, func(p VerifyProgress) { p.Live = true; out.progress(p) })
		res.Live = true
		return res, err
	case "gc":
		return gcStore(s.store), nil
	case "refresh":
		return refreshOnMount(ctx, s, req.Paths)
	}
	return nil, fmt.Errorf("%w %q (this mount speaks protocol %d)", errUnknownOp, req.Op, controlProtocol)
}

// errNoControl: no running mount answers on the cache dir's control
// socket.
var errNoControl = errors.New("no control socket")

// controlConn is a client connection to a mount's control socket.
type controlConn struct {
	conn  *net.UnixConn
	rd    *bufio.Reader
	Hello controlHello
}

// dialControl connects to the mount serving dir. It returns errNoControl
// (wrapped) if there is no socket or nobody listens on it.
func dialControl(dir string) (*controlConn, error) {
	addr, dirFd, err := sockAddr(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoControl, err)
	}
	defer closeFile(dirFd)
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoControl, err)
	}
	return &controlConn{conn: conn, rd: bufio.NewReaderSize(conn, 64<<10)}, nil
}

func (c *controlConn) Close() error { return c.conn.Close() }

// call sends req and reads the answer: onProgress gets each progress
// message, the result is decoded into result. The connection is left
// open until the answer is in (closing it would cancel the job).
func (c *controlConn) call(req controlRequest, onProgress func(json.RawMessage), result any) error {
	if err := json.NewEncoder(c.conn).Encode(req); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	dec := json.NewDecoder(c.rd)
	for {
		var m controlMsg
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("control socket: the mount closed the connection (%v); see its log", err)
		}
		switch m.Type {
		case "hello":
			if m.Hello != nil {
				c.Hello = *m.Hello
			}
		case "progress":
			if onProgress != nil {
				onProgress(m.Progress)
			}
		case "result":
			if result == nil {
				return nil
			}
			return json.Unmarshal(m.Result, result)
		case "error":
			return errors.New(m.Error)
		}
	}
}

// cacheOwner says how a cache dir may be used now: through a mount's
// control socket (conn set), directly (nothing holds it), or not at all
// (held by a process without a socket: an offline warm, verify, or an
// older mount), with a sentence saying so.
func cacheOwner(dir string) (conn *controlConn, holder string, err error) {
	if _, err := os.Stat(filepath.Join(dir, "index")); err != nil {
		return nil, "", fmt.Errorf("%s holds no strata cache (empty, cleared, or not a cache directory): %w", dir, err)
	}
	holder = cache.LockHolder(dir)
	if holder == "" {
		return nil, "", nil
	}
	conn, err = dialControl(dir)
	if err != nil {
		return nil, holder, fmt.Errorf("%s is in use by %s, which serves no control socket (a warm or cache command still running, or a mount started with --control-socket=false); wait for it or unmount it", dir, holder)
	}
	return conn, holder, nil
}
