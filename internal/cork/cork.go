// Package cork holds what is written to a socket between Cork and Uncork
// and writes it in one system call. The WebSocket library writes a frame
// in pieces through a small buffer (the header, then the payload; a
// client's masked frames 4 KiB at a time), and each write to a loopback
// or LAN socket wakes the reader at the other end: corked, a frame, or
// several queued ones, leave in one write and one wake-up.
package cork

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/ahp-dev/ahpd/internal/spare"
)

// Conn is a net.Conn whose writes are held while it is corked. Writes of
// other goroutines meanwhile (a ping, a pong) are held too, in order. A
// write that fails fails every later one. All methods are safe for
// concurrent use; Cork and Uncork on a nil *Conn do nothing.
type Conn struct {
	net.Conn
	out atomic.Int64 // bytes written to the socket

	mu     sync.Mutex // guards the fields below; held across a write to the socket
	corked bool
	held   []byte // what was written while corked, in memory from heldBufs
	err    error  // a write that failed: the socket takes no more
}

// New wraps c.
func New(c net.Conn) *Conn { return &Conn{Conn: c} }

// Written returns the bytes written to the socket so far.
func (c *Conn) Written() int64 { return c.out.Load() }

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if c.corked {
		if c.held == nil {
			if c.held = heldBufs.Get(); c.held == nil {
				c.held = make([]byte, 0, 64<<10)
			}
		}
		c.held = append(c.held, p...)
		return len(p), nil
	}
	return c.write(p)
}

// write writes p to the socket; c.mu is held.
func (c *Conn) write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	if err != nil {
		c.err = err
	}
	return n, err
}

// heldBufs is the memory of corked writes, shared by every connection:
// it is in use only from Cork to Uncork, so an idle connection holds
// none. A buffer above MaxHeld (a frame of a larger negotiated
// maximumFrameBytes) is not kept; a new one is 64 KiB, a frame of the
// default maximum.
var heldBufs = spare.Pool{MaxCap: MaxHeld}

// MaxHeld is the largest buffer the package keeps for reuse.
const MaxHeld = 256 << 10

// Cork holds what is written from now until Uncork.
func (c *Conn) Cork() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// Uncork writes what Cork held, and returns the error of that write or of
// an earlier one.
func (c *Conn) Uncork() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.held == nil {
		return c.err
	}
	held := c.held
	c.held = nil
	var err error
	if c.err == nil {
		_, err = c.write(held)
	}
	heldBufs.Put(held)
	if err == nil {
		err = c.err
	}
	return err
}

// Held returns the capacity of the memory c holds now (for tests of its
// bound).
func (c *Conn) Held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cap(c.held)
}
