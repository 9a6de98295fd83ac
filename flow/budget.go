package flow

import (
	"fmt"
	"sync"
)

// Budget is a byte budget shared by several Senders (a daemon's total
// over its connections, SenderConfig.Shared). Unlike the rest of this
// package it is safe for concurrent use: each Sender's owner takes from
// and returns to it.
//
// A Budget made by Child also counts in its parent: a token's budget
// inside the daemon's total, a connection's inside its token's. What it
// takes or reserves is taken from the parent too, and it has room only
// while its parent has.
type Budget struct {
	max    int64
	parent *Budget // nil for a root

	mu    sync.Mutex // guards used and freed
	used  int64
	freed chan struct{} // closed when used falls below max; nil if nobody waits
}

// NewBudget returns a budget of max bytes (max > 0).
func NewBudget(max int64) *Budget {
	if max <= 0 {
		panic("flow: NewBudget needs a positive size")
	}
	return &Budget{max: max}
}

// Child returns a budget of max bytes (max > 0) whose use also counts in
// b: it has room only while both have.
func (b *Budget) Child(max int64) *Budget {
	c := NewBudget(max)
	c.parent = b
	return c
}

// Max returns the budget's size.
func (b *Budget) Max() int64 { return b.max }

// Used returns the bytes taken now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Left returns the bytes not taken (0 when spent), here and in every
// parent.
func (b *Budget) Left() int64 {
	b.mu.Lock()
	left := max(0, b.max-b.used)
	b.mu.Unlock()
	if b.parent != nil {
		left = min(left, b.parent.Left())
	}
	return left
}

// Freed returns a channel that is closed once the budget has room for a
// message again (MinPullSize): at once if it has now. Owners of Senders
// whose streams were refused for it wait on it, then call
// Sender.WakeStarved.
// For a Child, it waits for the budget that has no room: its own first,
// else its parent's (an owner woken for one looks again).
func (b *Budget) Freed() <-chan struct{} {
	b.mu.Lock()
	if b.max-b.used >= MinPullSize {
		b.mu.Unlock()
		if b.parent != nil {
			return b.parent.Freed()
		}
		return closedChan
	}
	defer b.mu.Unlock()
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Take counts n bytes as used, whether or not they fit: a holder that
// keeps a queue (a telemetry viewer's, AttachRequest.Queue) checks Left
// first and applies its loss policy when they do not. Give returns them.
// A negative n is a broken caller (it would give back through Take, or
// take through Give, what the other side's bookkeeping never saw): both
// panic on one.
func (b *Budget) Take(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("flow: Budget.Take(%d): negative", n))
	}
	b.add(n)
}

// Give returns n bytes taken with Take.
func (b *Budget) Give(n int64) {
	if n < 0 {
		panic(fmt.Sprintf("flow: Budget.Give(%d): negative", n))
	}
	b.add(-n)
}

// reserve takes up to want bytes, but only if at least floor are left
// here and in every parent; it returns what it took (0 for nothing). A
// child holds its lock while it asks its parent (children lock before
// parents, never the other way).
func (b *Budget) reserve(want, floor int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(want, b.max-b.used)
	if n < floor || n <= 0 {
		return 0
	}
	if b.parent != nil {
		if n = b.parent.reserve(n, floor); n == 0 {
			return 0
		}
	}
	b.used += n
	return n
}

func (b *Budget) add(n int64) {
	for ; b != nil; b = b.parent {
		b.mu.Lock()
		b.used += n
		if n < 0 && b.freed != nil && b.max-b.used >= MinPullSize {
			close(b.freed)
			b.freed = nil
		}
		b.mu.Unlock()
	}
}
