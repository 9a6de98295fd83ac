package flow

import (
	"fmt"
	"sync"
)

// Budget is a byte budget shared by several Senders (a daemon's total
// over its connections, SenderConfig.Shared). Unlike the rest of this
// package it is safe for concurrent use: each Sender's owner takes from
// and returns to it.
type Budget struct {
	max int64

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

// Max returns the budget's size.
func (b *Budget) Max() int64 { return b.max }

// Used returns the bytes taken now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Left returns the bytes not taken (0 when spent).
func (b *Budget) Left() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, b.max-b.used)
}

// Freed returns a channel that is closed once the budget has room for a
// message again (MinPullSize): at once if it has now. Owners of Senders
// whose streams were refused for it wait on it, then call
// Sender.WakeStarved.
func (b *Budget) Freed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.max-b.used >= MinPullSize {
		return closedChan
	}
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

// reserve takes up to want bytes, but only if at least floor are left;
// it returns what it took (0 for nothing).
func (b *Budget) reserve(want, floor int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(want, b.max-b.used)
	if n < floor || n <= 0 {
		return 0
	}
	b.used += n
	return n
}

func (b *Budget) add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
	if n < 0 && b.freed != nil && b.max-b.used >= MinPullSize {
		close(b.freed)
		b.freed = nil
	}
}
