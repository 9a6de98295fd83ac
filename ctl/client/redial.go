package client

import (
	"context"
	"net"
	"sync"
)

// Redialer shares one connection among its users (TCP streams) and dials
// a new one when it has ended: Get is a TCPOptions.Dial. Dials are not
// repeated concurrently; callers that ask while one is under way wait for
// its outcome. Safe for concurrent use.
type Redialer struct {
	dial func(ctx context.Context) (*Conn, error)

	mu      sync.Mutex // guards the fields below
	cur     *Conn
	dialing chan struct{} // closed when the dial under way has finished
	lastErr error         // the outcome of the last dial
	closed  bool
}

// NewRedialer returns a Redialer that makes connections with dial.
func NewRedialer(dial func(ctx context.Context) (*Conn, error)) *Redialer {
	return &Redialer{dial: dial}
}

// Get returns the current connection if it has not ended, or dials one.
func (r *Redialer) Get(ctx context.Context) (*Conn, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, net.ErrClosed
		}
		if c := r.cur; c != nil {
			select {
			case <-c.Done():
				r.cur = nil
				r.mu.Unlock()
				c.Close() // its reader has ended: this only reaps it
				continue
			default:
				r.mu.Unlock()
				return c, nil
			}
		}
		if ch := r.dialing; ch != nil {
			r.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			r.mu.Lock()
			c, err := r.cur, r.lastErr
			r.mu.Unlock()
			if c == nil {
				if err == nil {
					err = net.ErrClosed
				}
				return nil, err
			}
			continue
		}
		ch := make(chan struct{})
		r.dialing = ch
		r.mu.Unlock()
		c, err := r.dial(ctx)
		r.mu.Lock()
		r.dialing, r.lastErr = nil, err
		if err == nil && r.closed {
			r.mu.Unlock()
			c.Close()
			close(ch)
			return nil, net.ErrClosed
		}
		r.cur = c
		r.mu.Unlock()
		close(ch)
		return c, err
	}
}

// Close closes the current connection; later Gets fail.
func (r *Redialer) Close() error {
	r.mu.Lock()
	r.closed = true
	c := r.cur
	r.cur = nil
	r.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	return nil
}
