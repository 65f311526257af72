// Package control is the control socket of a running mount: the protocol
// (Request, Hello, the newline-delimited JSON lines described in
// server.go), the Server a mount runs on <cache-dir>/control.sock, and the
// client (Dial, Conn.Call, Owner) that `strata warm`, `strata cache` and
// `strata refresh` use to have the mount do the work while it holds the
// cache directory. What each op does is the mount's Handler
// (internal/mount); this package only frames, authenticates (SO_PEERCRED:
// the mount's user or root) and cancels (a closed connection cancels its
// request).
//
// Locks: reply.mu serialises the lines written to one connection (a
// job's progress and its final answer); it is held only for one write to
// the local socket.
//
// control may import cache (the lock holder of a cache dir), fs (the
// refresh result) and internal/config.
package control
