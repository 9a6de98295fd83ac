package client

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// corkConn is a socket that holds what is written to it while corked and
// writes it in one system call when uncorked. The WebSocket library masks
// a client's frames (RFC 6455 §5.3) through its 4 KiB write buffer and so
// writes a frame in 4 KiB pieces: an upload's 24–96 KiB messages cost 6–24
// writes each, and as many wake-ups of the daemon. Conn corks around each
// message it sends.
type corkConn struct {
	net.Conn

	mu     sync.Mutex // guards the fields below; held across a write to the socket
	corked bool
	held   []byte // what was written while corked
}

// maxKeptCork bounds the memory a corkConn keeps between messages.
const maxKeptCork = 256 << 10

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what cork held.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	if cap(c.held) > maxKeptCork {
		c.held = nil
	}
	return err
}

// dialSocket dials the socket under a corkConn (tests wrap it).
var dialSocket = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext

// corkingClient returns an HTTP client like http.DefaultClient whose
// connection is a corkConn, and the function that returns that connection
// once the client dialled it (nil before).
func corkingClient() (*http.Client, func() *corkConn) {
	var (
		mu   sync.Mutex
		last *corkConn
	)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialSocket(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &corkConn{Conn: c}
		mu.Lock()
		last = cc
		mu.Unlock()
		return cc, nil
	}
	return &http.Client{Transport: t}, func() *corkConn {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}
