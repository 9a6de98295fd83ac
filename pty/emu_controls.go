// C0 controls, tabs, index and scrolling, and ESC dispatch with cursor save/restore and resets.

package pty

// --- controls ---

func (e *emulator) execute(r rune) {
	switch r {
	case 0x07: // BEL
	case 0x08: // BS
		e.pending = false
		if e.x > 0 {
			e.x--
		}
	case 0x09: // HT
		e.tab(1)
	case 0x0A, 0x0B, 0x0C: // LF VT FF
		e.pending = false
		e.index()
		if e.lnm {
			e.x = 0
		}
	case 0x0D: // CR
		e.pending = false
		e.x = 0
	case 0x0E: // SO
		e.gl = 1
	case 0x0F: // SI
		e.gl = 0
	case 0x84: // IND
		e.pending = false
		e.index()
	case 0x85: // NEL
		e.pending = false
		e.x = 0
		e.index()
	case 0x88: // HTS
		e.tabs[e.x] = true
	case 0x8D: // RI
		e.reverseIndex()
	}
}

func (e *emulator) tab(n int) {
	e.pending = false
	for ; n > 0; n-- {
		x := e.x + 1
		for x < e.cols && !e.tabs[x] {
			x++
		}
		if x >= e.cols {
			e.x = e.cols - 1
			return
		}
		e.x = x
	}
}

func (e *emulator) backTab(n int) {
	e.pending = false
	for ; n > 0 && e.x > 0; n-- {
		x := e.x - 1
		for x > 0 && !e.tabs[x] {
			x--
		}
		e.x = x
	}
}

// index moves down one line, scrolling the region when at its bottom.
func (e *emulator) index() {
	scr := e.cur()
	if e.y == scr.bot {
		e.scrollUp(1, !e.alt && scr.top == 0)
	} else if e.y < e.rows-1 {
		e.y++
	}
}

func (e *emulator) reverseIndex() {
	e.pending = false
	scr := e.cur()
	if e.y == scr.top {
		e.scrollDown(1)
	} else if e.y > 0 {
		e.y--
	}
}

// scrollUp scrolls the scroll region up by n lines; the lines leaving the
// top go to the scrollback when toScrollback is set.
func (e *emulator) scrollUp(n int, toScrollback bool) {
	scr := e.cur()
	top, bot := scr.top, scr.bot
	h := bot - top + 1
	if n > h {
		n = h
	}
	blank := e.eraseCell()
	for k := 0; k < n; k++ {
		first := scr.lines[top]
		if toScrollback {
			e.sb.push(first, scr.wrapped[top])
		}
		if top == 0 && bot == len(scr.lines)-1 {
			// The whole screen scrolls: slide the window over the spare
			// capacity of lines and wrapped instead of moving every row
			// (the common case of output scrolling by).
			scr.slide()
		} else {
			copy(scr.lines[top:bot], scr.lines[top+1:bot+1])
			copy(scr.wrapped[top:bot], scr.wrapped[top+1:bot+1])
		}
		e.erase(first, blank)
		scr.lines[bot] = first
		scr.wrapped[bot] = false
	}
}

// slideRoom is how many scrolls a screen's row slices absorb before they
// are moved back to the start of fresh arrays.
const slideRoom = 256

// slide drops row 0 and appends a slot at the bottom, whose content the
// caller sets, in O(1) amortized time.
func (s *screen) slide() {
	rows := len(s.lines)
	if cap(s.lines) == rows || cap(s.wrapped) == rows {
		// Out of room: move the rows back to the start of the arrays
		// (allocated once per screen size).
		if cap(s.base) < rows+slideRoom {
			s.base = make([]*row, rows+slideRoom)
			s.wbase = make([]bool, rows+slideRoom)
		}
		n := copy(s.base, s.lines)
		clear(s.base[n:])
		copy(s.wbase, s.wrapped)
		s.lines, s.wrapped = s.base[:rows], s.wbase[:rows]
	}
	s.lines[0] = nil
	s.lines = s.lines[1 : rows+1]
	s.wrapped = s.wrapped[1 : rows+1]
}

// fill sets every cell of line to c.
func fill(line []cell, c cell) {
	if c == (cell{}) {
		clear(line)
		return
	}
	for i := range line {
		line[i] = c
	}
}

func (e *emulator) scrollDown(n int) {
	scr := e.cur()
	top, bot := scr.top, scr.bot
	h := bot - top + 1
	if n > h {
		n = h
	}
	blank := e.eraseCell()
	for k := 0; k < n; k++ {
		last := scr.lines[bot]
		copy(scr.lines[top+1:bot+1], scr.lines[top:bot])
		copy(scr.wrapped[top+1:bot+1], scr.wrapped[top:bot])
		e.erase(last, blank)
		scr.lines[top] = last
		scr.wrapped[top] = false
	}
}

// --- ESC ---

func (e *emulator) escDispatch(final byte) {
	switch e.inter {
	case 0:
		switch final {
		case '7':
			e.saveCursor()
		case '8':
			e.restoreCursor()
		case 'D':
			e.execute(0x84)
		case 'E':
			e.execute(0x85)
		case 'H':
			e.execute(0x88)
		case 'M':
			e.reverseIndex()
		case 'c':
			e.fullReset()
		case '=':
			e.keypad = true
		case '>':
			e.keypad = false
		case 'n':
			e.gl = 2
		case 'o':
			e.gl = 3
		}
	case '(', ')', '*', '+':
		if final == 'B' {
			final = 0 // ASCII is stored as 0
		}
		e.charsets[e.inter-'('] = final
	case '#':
		if final == '8' { // DECALN
			scr := e.cur()
			for y := range scr.lines {
				fill(scr.line(y), cell{ch: 'E'})
				scr.wrapped[y] = false
			}
			scr.top, scr.bot = 0, e.rows-1
			e.x, e.y, e.pending = 0, 0, false
		}
	}
}

func (e *emulator) saveCursor() {
	scr := e.cur()
	scr.saved = savedCursor{x: e.x, y: e.y, fg: e.fg, bg: e.bg, charsets: e.charsets, gl: e.gl}
}

func (e *emulator) restoreCursor() {
	s := e.cur().saved
	e.x, e.y = min(s.x, e.cols-1), min(s.y, e.rows-1)
	e.fg, e.bg = s.fg, s.bg
	e.charsets, e.gl = s.charsets, s.gl
	e.pending = false
}

func (e *emulator) fullReset() {
	rows, cols, sbMax, cellsOnly := e.rows, e.cols, e.sb.max, e.cellsOnly
	clusters, idx := e.clusters, e.clusterIdx
	*e = emulator{}
	*e = *newEmulatorRows(rows, cols, sbMax, cellsOnly)
	e.clusters, e.clusterIdx = clusters, idx
}

func (e *emulator) softReset() {
	e.cursorHidden = false
	e.insert = false
	e.origin = false
	e.autowrap = true
	e.cursorKeys = false
	e.keypad = false
	e.fg, e.bg = 0, 0
	e.charsets, e.gl = [4]byte{}, 0
	scr := e.cur()
	scr.top, scr.bot = 0, e.rows-1
	scr.saved = savedCursor{}
	e.pending = false
}
