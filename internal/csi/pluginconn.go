package csi

import (
	"encoding/json"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// backingAnswer bounds the wait for the plugin's answer to a backing
// request: past it the sidecar gives the file to userspace reads.
const backingAnswer = 10 * time.Second

// PluginConn is the sidecar's end of a volume's connection after the
// hand-off: one reader takes the plugin's messages (the "exit" command,
// answers to backing requests), and, when the plugin offered it,
// Register and Unregister ask it to register backing files (they
// implement fs.Backing).
type PluginConn struct {
	c    *net.UnixConn
	exit chan struct{} // closed on "exit"
	gone chan struct{} // closed when the connection fails or closes

	mu      sync.Mutex // guards below; never held across I/O
	seq     uint64
	waiting map[uint64]chan Control
}

// NewPluginConn starts reading c.
func NewPluginConn(c *net.UnixConn) *PluginConn {
	p := &PluginConn{c: c, exit: make(chan struct{}), gone: make(chan struct{}), waiting: map[uint64]chan Control{}}
	go p.read()
	return p
}

// Exit is closed when the plugin says the volume was unpublished.
func (p *PluginConn) Exit() <-chan struct{} { return p.exit }

// Close closes the connection.
func (p *PluginConn) Close() error { return p.c.Close() }

func (p *PluginConn) read() {
	defer close(p.gone)
	exited := false
	for {
		m, err := RecvControl(p.c)
		if err != nil {
			return // the plugin restarted or closed: keep serving
		}
		switch m.Op {
		case OpExit:
			if !exited {
				exited = true
				close(p.exit)
			}
		case OpBackingDone:
			p.mu.Lock()
			ch := p.waiting[m.Seq]
			delete(p.waiting, m.Seq)
			p.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
}

// Register asks the plugin to register the open file fd as a backing
// file and returns its id.
func (p *PluginConn) Register(fd int) (int32, syscall.Errno) {
	m, errno := p.ask(Control{Op: OpBackingOpen}, fd)
	if errno != 0 {
		return 0, errno
	}
	return m.ID, 0
}

// Unregister asks the plugin to release id.
func (p *PluginConn) Unregister(id int32) syscall.Errno {
	_, errno := p.ask(Control{Op: OpBackingClose, ID: id}, -1)
	return errno
}

// ask sends m (with fd as SCM_RIGHTS unless it is -1) and waits for the
// answer. A connection that is gone or a plugin that does not answer is
// EIO: go-fuse then stops asking for the rest of the mount.
func (p *PluginConn) ask(m Control, fd int) (Control, syscall.Errno) {
	ch := make(chan Control, 1)
	p.mu.Lock()
	p.seq++
	m.Seq = p.seq
	p.waiting[m.Seq] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiting, m.Seq)
		p.mu.Unlock()
	}()
	b, _ := json.Marshal(m)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := p.c.WriteMsgUnix(b, oob, nil); err != nil {
		return Control{}, unix.EIO
	}
	select {
	case a := <-ch:
		return a, syscall.Errno(a.Errno)
	case <-p.gone:
		return Control{}, unix.EIO
	case <-time.After(backingAnswer):
		return Control{}, unix.EIO
	}
}
