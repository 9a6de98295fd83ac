// The emulator's scrollback: sbLine, the ring of lines that left the top of the normal screen.

package pty

import "unsafe"

// sbLine is one line of scrollback. A line of printable ASCII in the
// default pen — most of what scrolls by — is kept as its bytes (plain), a
// twelfth of its cells' size; any other line as its cells.
type sbLine struct {
	cells   []cell
	plain   []byte
	isPlain bool
	wrapped bool
}

// line returns the cells of l: its own, or a plain line's decoded into
// *scratch, which only ever holds decoded cells (reusing it for l's own
// cells would let the next decode overwrite them).
func (l *sbLine) line(scratch *[]cell) []cell {
	if !l.isPlain {
		return l.cells
	}
	s := (*scratch)[:0]
	for _, c := range l.plain {
		s = append(s, cell{ch: rune(c)})
	}
	*scratch = s
	return s
}

// setText stores a plain row's text in l.
func (l *sbLine) setText(text []byte, wrapped bool) {
	l.wrapped = wrapped
	l.isPlain = true
	l.plain = append(l.plain[:0], text...)
	l.cells = l.cells[:0]
}

// set stores src in l, as bytes when it is plain.
func (l *sbLine) set(src []cell, wrapped bool) {
	l.wrapped = wrapped
	plain := l.plain[:0]
	for _, c := range src {
		if c.fg != 0 || c.bg != 0 || c.ch < 0x20 || c.ch >= 0x7f {
			l.isPlain = false
			l.cells = append(l.cells[:0], src...)
			return
		}
		plain = append(plain, byte(c.ch))
	}
	l.isPlain = true
	l.plain = plain
	l.cells = l.cells[:0]
}

// scrollback is a ring of at most max lines; slots are reused.
type scrollback struct {
	lines []sbLine
	head  int
	max   int
}

func (s *scrollback) len() int { return len(s.lines) }

func (s *scrollback) at(i int) *sbLine { return &s.lines[(s.head+i)%len(s.lines)] }

// push appends a screen row to the scrollback.
func (s *scrollback) push(r *row, wrapped bool) {
	l := s.next()
	switch {
	case l == nil:
	case r.plain:
		l.setText(r.text, wrapped)
	default:
		l.set(r.cells[:usedLen(r.cells)], wrapped)
	}
}

// next returns the slot for the line pushed next, the oldest line's once
// the ring is full, or nil when there is no scrollback.
func (s *scrollback) next() *sbLine {
	if s.max <= 0 {
		return nil
	}
	if len(s.lines) < s.max {
		s.lines = append(s.lines, sbLine{})
		return &s.lines[len(s.lines)-1]
	}
	l := &s.lines[s.head]
	if s.head++; s.head == len(s.lines) {
		s.head = 0
	}
	return l
}

// usedLen returns the length of line without its trailing erased cells
// (cell{}). It skips zero memory 32 bytes at a time: a full-width line
// with a few characters at its start is pushed to the scrollback each time
// output scrolls.
func usedLen(line []cell) int {
	const size = int(unsafe.Sizeof(cell{}))
	n := len(line) * size // bytes
	if n == 0 {
		return 0
	}
	p := unsafe.Pointer(unsafe.SliceData(line))
	word := func(off int) uint64 { return *(*uint64)(unsafe.Add(p, off)) }
	for n >= 32 && word(n-8)|word(n-16)|word(n-24)|word(n-32) == 0 {
		n -= 32
	}
	k := (n + size - 1) / size // cells that may hold a non-zero byte
	for k > 0 && line[k-1] == (cell{}) {
		k--
	}
	return k
}

func (s *scrollback) clear() {
	s.lines = s.lines[:0]
	s.head = 0
}
