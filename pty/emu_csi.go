// CSI dispatch: cursor movement, erasing, line and character editing, DEC private modes and the alternate screen.

package pty

// --- CSI ---

func (e *emulator) csiDispatch(final byte) {
	switch e.prefix {
	case 0:
	case '?':
		e.csiPrivate(final)
		return
	default:
		return // '>' and '=' sequences (e.g. XTMODKEYS) do not change the screen model
	}
	if e.inter != 0 {
		switch {
		case e.inter == ' ' && final == 'q':
			e.cursorStyle = e.p0(0, 0)
		case e.inter == '!' && final == 'p':
			e.softReset()
		}
		return
	}
	switch final {
	case '@':
		e.pending = false
		e.insertCells(e.cur().line(e.y), e.x, e.p(0, 1), e.eraseCell())
	case 'A':
		e.cursorUp(e.p(0, 1))
	case 'B', 'e':
		e.cursorDown(e.p(0, 1))
	case 'C', 'a':
		e.pending = false
		e.x = min(e.cols-1, e.x+e.p(0, 1))
	case 'D':
		e.pending = false
		e.x = max(0, e.x-e.p(0, 1))
	case 'E':
		e.cursorDown(e.p(0, 1))
		e.x = 0
	case 'F':
		e.cursorUp(e.p(0, 1))
		e.x = 0
	case 'G', '`':
		e.pending = false
		e.x = min(e.cols-1, e.p(0, 1)-1)
	case 'H', 'f':
		e.cup(e.p(0, 1)-1, e.p(1, 1)-1)
	case 'I':
		e.tab(e.p(0, 1))
	case 'J':
		e.eraseDisplay(e.p0(0, 0))
	case 'K':
		e.eraseLine(e.p0(0, 0))
	case 'L':
		e.insertLines(e.p(0, 1))
	case 'M':
		e.deleteLines(e.p(0, 1))
	case 'P':
		e.deleteChars(e.p(0, 1))
	case 'S':
		e.scrollUp(e.p(0, 1), false)
	case 'T':
		if e.nparams <= 1 {
			e.scrollDown(e.p(0, 1))
		}
	case 'X':
		e.pending = false
		e.eraseRange(e.cur().lines[e.y], e.x, min(e.cols, e.x+e.p(0, 1)))
	case 'Z':
		e.backTab(e.p(0, 1))
	case 'b':
		if r := e.lastChar; r != 0 {
			for n := min(e.p(0, 1), 65535); n > 0; n-- {
				if r < 0x80 {
					e.printASCII(string(r))
				} else {
					e.printRune(r)
				}
			}
		}
	case 'd':
		e.pending = false
		e.y = min(e.rows-1, e.p(0, 1)-1)
		if e.origin {
			scr := e.cur()
			e.y = min(scr.bot, scr.top+e.p(0, 1)-1)
		}
	case 'g':
		switch e.p0(0, 0) {
		case 0:
			e.tabs[e.x] = false
		case 3:
			for i := range e.tabs {
				e.tabs[i] = false
			}
		}
	case 'h', 'l':
		set := final == 'h'
		for i := 0; i < e.nparams; i++ {
			switch e.params[i] {
			case 4:
				e.insert = set
			case 20:
				e.lnm = set
			}
		}
	case 'm':
		e.sgr()
	case 'r':
		top := e.p(0, 1)
		bot := e.p(1, e.rows)
		bot = min(bot, e.rows)
		if top < bot {
			scr := e.cur()
			scr.top, scr.bot = top-1, bot-1
			e.cup(0, 0)
		}
	case 's':
		e.saveCursor()
	case 'u':
		e.restoreCursor()
	}
}

func (e *emulator) cursorUp(n int) {
	e.pending = false
	scr := e.cur()
	if e.y >= scr.top {
		e.y = max(scr.top, e.y-n)
	} else {
		e.y = max(0, e.y-n)
	}
}

func (e *emulator) cursorDown(n int) {
	e.pending = false
	scr := e.cur()
	if e.y <= scr.bot {
		e.y = min(scr.bot, e.y+n)
	} else {
		e.y = min(e.rows-1, e.y+n)
	}
}

// cup moves to (row, col), zero-based, relative to the scroll region when
// origin mode is set.
func (e *emulator) cup(row, col int) {
	e.pending = false
	e.x = max(0, min(e.cols-1, col))
	if e.origin {
		scr := e.cur()
		e.y = max(scr.top, min(scr.bot, scr.top+row))
		return
	}
	e.y = max(0, min(e.rows-1, row))
}

// eraseRange erases cells [x0, x1) of r, repairing cut wide characters.
func (e *emulator) eraseRange(r *row, x0, x1 int) {
	if x0 >= x1 {
		return
	}
	blank := e.eraseCell()
	if r.plain && x1 >= len(r.text) && blank == (cell{}) {
		r.text = r.text[:min(x0, len(r.text))] // no hole: the row stays plain
		return
	}
	line := r.line()
	if x0 > 0 && line[x0].ch == tailRune {
		line[x0-1] = blank
	}
	if x1 < e.cols && line[x1].ch == tailRune {
		line[x1] = blank
	}
	fill(line[x0:x1], blank)
}

// ex is the cursor column for erase operations: xterm.js keeps x == cols
// while a wrap is pending, so "erase from cursor" spares the last cell.
func (e *emulator) ex() int {
	if e.pending {
		return e.cols
	}
	return e.x
}

func (e *emulator) eraseDisplay(mode int) {
	scr := e.cur()
	switch mode {
	case 0:
		e.eraseRange(scr.lines[e.y], e.ex(), e.cols)
		if e.ex() == 0 {
			scr.wrapped[e.y] = false
		}
		for y := e.y + 1; y < e.rows; y++ {
			e.eraseRange(scr.lines[y], 0, e.cols)
			scr.wrapped[y] = false
		}
	case 1:
		for y := 0; y < e.y; y++ {
			e.eraseRange(scr.lines[y], 0, e.cols)
			scr.wrapped[y] = false
		}
		e.eraseRange(scr.lines[e.y], 0, min(e.cols, e.ex()+1))
	case 2:
		for y := 0; y < e.rows; y++ {
			e.eraseRange(scr.lines[y], 0, e.cols)
			scr.wrapped[y] = false
		}
	case 3:
		e.sb.clear()
	}
}

func (e *emulator) eraseLine(mode int) {
	scr := e.cur()
	line := scr.lines[e.y]
	switch mode {
	case 0:
		e.eraseRange(line, e.ex(), e.cols)
	case 1:
		e.eraseRange(line, 0, min(e.cols, e.ex()+1))
	case 2:
		e.eraseRange(line, 0, e.cols)
		scr.wrapped[e.y] = false
	}
}

func (e *emulator) insertLines(n int) {
	e.pending = false
	scr := e.cur()
	if e.y < scr.top || e.y > scr.bot {
		return
	}
	saveTop := scr.top
	scr.top = e.y
	e.scrollDown(n)
	scr.top = saveTop
	e.x = 0
}

func (e *emulator) deleteLines(n int) {
	e.pending = false
	scr := e.cur()
	if e.y < scr.top || e.y > scr.bot {
		return
	}
	saveTop := scr.top
	scr.top = e.y
	e.scrollUp(n, false)
	scr.top = saveTop
	e.x = 0
}

func (e *emulator) deleteChars(n int) {
	e.pending = false
	line := e.cur().line(e.y)
	blank := e.eraseCell()
	if n > e.cols-e.x {
		n = e.cols - e.x
	}
	if e.x > 0 && line[e.x].ch == tailRune {
		line[e.x-1] = blank
	}
	copy(line[e.x:], line[e.x+n:])
	fill(line[e.cols-n:e.cols], blank)
	if line[e.x].ch == tailRune {
		line[e.x] = blank
	}
}

func (e *emulator) csiPrivate(final byte) {
	if e.inter == '$' || e.inter != 0 {
		return
	}
	switch final {
	case 'h', 'l':
		set := final == 'h'
		for i := 0; i < e.nparams; i++ {
			e.setPrivateMode(int(e.params[i]), set)
		}
	case 'J':
		e.eraseDisplay(e.p0(0, 0))
	case 'K':
		e.eraseLine(e.p0(0, 0))
	}
}

func (e *emulator) setPrivateMode(m int, set bool) {
	switch m {
	case 1:
		e.cursorKeys = set
	case 6:
		e.origin = set
		e.cup(0, 0)
	case 7:
		e.autowrap = set
		if !set {
			e.pending = false
		}
	case 12:
		e.cursorBlink = set
	case 25:
		e.cursorHidden = !set
	case 66:
		e.keypad = set
	case 9, 1000, 1002, 1003:
		if set {
			e.mouse = m
		} else {
			e.mouse = 0
		}
	case 1004:
		e.focus = set
	case 1005, 1006, 1015, 1016:
		if set {
			e.mouseEnc = m
		} else {
			e.mouseEnc = 0
		}
	case 2004:
		e.bracketedPaste = set
	case 1048:
		if set {
			e.saveCursor()
		} else {
			e.restoreCursor()
		}
	case 47, 1047, 1049:
		if set {
			if m == 1049 {
				e.saveCursor()
			}
			e.switchScreen(true)
		} else {
			e.switchScreen(false)
			if m == 1049 {
				e.restoreCursor()
			}
		}
	}
}

// switchScreen activates the alternate (on) or normal screen, as xterm.js
// does: the cursor position carries over, the alternate screen is cleared
// with the erase attributes on entry and discarded on exit.
func (e *emulator) switchScreen(on bool) {
	if on == e.alt {
		return
	}
	if on {
		a := &e.scr[1]
		blank := e.eraseCell()
		for y, r := range a.lines {
			e.erase(r, blank)
			a.wrapped[y] = false
		}
	} else {
		a := &e.scr[1]
		for y, r := range a.lines {
			e.erase(r, cell{})
			a.wrapped[y] = false
		}
	}
	e.alt = on
}
