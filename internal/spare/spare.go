// Package spare keeps buffers for reuse, within a bound: a bulk stream
// decodes or encodes each message into memory an earlier one used
// instead of allocating anew. A List is one owner's: an idle one pins at
// most Count buffers of at most MaxCap bytes. A Pool is shared by many
// owners, each of which holds a buffer only while it uses it, and the
// garbage collector empties it.
//
// A List is not safe for concurrent use: its owner's lock guards it. A
// Pool is.
package spare

import "sync"

// List holds at most Count buffers, each of capacity at most MaxCap
// (larger ones are left to the garbage collector).
type List struct {
	Count  int
	MaxCap int
	bufs   [][]byte
}

// Get returns an empty buffer from the list, or nil when it has none.
func (l *List) Get() []byte {
	n := len(l.bufs)
	if n == 0 {
		return nil
	}
	b := l.bufs[n-1]
	l.bufs[n-1] = nil
	l.bufs = l.bufs[:n-1]
	return b
}

// Put offers b's memory for reuse; nothing may use b afterwards. It is
// kept only within the list's bounds.
func (l *List) Put(b []byte) {
	if !fits(b, l.MaxCap) || len(l.bufs) >= l.Count {
		return
	}
	l.bufs = append(l.bufs, b[:0])
}

// Bytes returns the capacity the list holds.
func (l *List) Bytes() int {
	n := 0
	for _, b := range l.bufs {
		n += cap(b)
	}
	return n
}

// fits reports whether b's memory is worth keeping under a bound of
// maxCap bytes.
func fits(b []byte, maxCap int) bool { return cap(b) > 0 && cap(b) <= maxCap }

// Pool holds buffers of capacity at most MaxCap (larger ones are left to
// the garbage collector) for whichever goroutine needs one next: a
// sync.Pool, so it holds only what was put and not yet taken, and the
// garbage collector empties it within two cycles. The zero value with
// MaxCap set is ready to use; a Pool must not be copied after first use.
type Pool struct {
	MaxCap int
	bufs   sync.Pool // of *[]byte, holding a buffer
	boxes  sync.Pool // of *[]byte, empty: Put reuses them instead of allocating
}

// Get returns an empty buffer from the pool, or nil when it has none.
func (p *Pool) Get() []byte {
	box, _ := p.bufs.Get().(*[]byte)
	if box == nil {
		return nil
	}
	b := *box
	*box = nil
	p.boxes.Put(box)
	return b
}

// Put offers b's memory for reuse; nothing may use b afterwards. It is
// kept only if its capacity is within MaxCap.
func (p *Pool) Put(b []byte) {
	if !fits(b, p.MaxCap) {
		return
	}
	box, _ := p.boxes.Get().(*[]byte)
	if box == nil {
		box = new([]byte)
	}
	*box = b[:0]
	p.bufs.Put(box)
}
