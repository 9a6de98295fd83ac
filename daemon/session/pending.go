package session

import (
	"container/list"
	"net"
	"sync"
)

// pendingSet holds the sockets that have not yet authenticated, oldest
// first: those still sending a request's headers or idle between
// requests, and upgraded WebSocket connections before initialize. They
// are bounded together by maxPendingConnections. A new one is always
// admitted: past the bound the oldest is closed for it, so a peer that
// opens sockets and never speaks (or never initializes) cannot lock out
// one that does — its sockets are the oldest, and a legitimate client
// authenticates within a round trip of connecting. An upgrade that
// carries a valid bearer token is not counted at all (serveWS).
// Everything is O(1) under one mutex.
type pendingSet struct {
	mu      sync.Mutex
	order   *list.List // of net.Conn, oldest first
	entries map[net.Conn]*list.Element
}

func newPendingSet() *pendingSet {
	return &pendingSet{order: list.New(), entries: map[net.Conn]*list.Element{}}
}

// add counts c as pending (again, if it was: it moves to the back) and,
// while more than max are, closes the oldest others. It returns how many
// it closed.
func (p *pendingSet) add(c net.Conn, max int) int {
	var evict []net.Conn
	p.mu.Lock()
	if e, ok := p.entries[c]; ok {
		p.order.MoveToBack(e)
	} else {
		p.entries[c] = p.order.PushBack(c)
	}
	for p.order.Len() > max {
		oldest := p.order.Remove(p.order.Front()).(net.Conn)
		delete(p.entries, oldest)
		evict = append(evict, oldest)
	}
	p.mu.Unlock()
	for _, o := range evict {
		_ = o.Close() // its reader or request fails, and it ends
	}
	return len(evict)
}

// remove stops counting c; it is not an error if c is not counted.
func (p *pendingSet) remove(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.entries[c]; ok {
		p.order.Remove(e)
		delete(p.entries, c)
	}
}

// len returns how many are counted.
func (p *pendingSet) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}
