// Package spare keeps a few buffers for reuse, within a bound: a bulk
// stream decodes or encodes each message into memory an earlier one used
// instead of allocating anew, and an idle one pins at most Count buffers
// of at most MaxCap bytes.
//
// A List is not safe for concurrent use: its owner's lock guards it.
package spare

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
	if cap(b) == 0 || cap(b) > l.MaxCap || len(l.bufs) >= l.Count {
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
