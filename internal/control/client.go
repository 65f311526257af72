package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/stratafs/strata/cache"
)

// ErrNoControl: no running mount answers on the cache dir's control
// socket.
var ErrNoControl = errors.New("no control socket")

// Conn is a client connection to a mount's control socket.
type Conn struct {
	conn  *net.UnixConn
	rd    *bufio.Reader
	Hello Hello
}

// Dial connects to the mount serving dir. It returns ErrNoControl
// (wrapped) if there is no socket or nobody listens on it.
func Dial(dir string) (*Conn, error) {
	addr, dirFd, err := sockAddr(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoControl, err)
	}
	defer closeFile(dirFd)
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoControl, err)
	}
	return &Conn{conn: conn, rd: bufio.NewReaderSize(conn, 64<<10)}, nil
}

func (c *Conn) Close() error { return c.conn.Close() }

// Call sends req and reads the answer: onProgress gets each progress
// message, the result is decoded into result. The connection is left
// open until the answer is in (closing it would cancel the job).
func (c *Conn) Call(req Request, onProgress func(json.RawMessage), result any) error {
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

// Owner says how a cache dir may be used now: through a mount's
// control socket (conn set), directly (nothing holds it), or not at all
// (held by a process without a socket: an offline warm, verify, or an
// older mount), with a sentence saying so.
func Owner(dir string) (conn *Conn, holder string, err error) {
	if _, err := os.Stat(filepath.Join(dir, "index")); err != nil {
		return nil, "", fmt.Errorf("%s holds no strata cache (empty, cleared, or not a cache directory): %w", dir, err)
	}
	holder = cache.LockHolder(dir)
	if holder == "" {
		return nil, "", nil
	}
	conn, err = Dial(dir)
	if err != nil {
		return nil, holder, fmt.Errorf("%s is in use by %s, which serves no control socket (a warm or cache command still running, or a mount started with --control-socket=false); wait for it or unmount it", dir, holder)
	}
	return conn, holder, nil
}
