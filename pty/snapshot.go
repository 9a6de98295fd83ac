package pty

import (
	"runtime"
	"strconv"
	"strings"
	"unicode/utf8"
)

// snapshot serializes the emulator state as terminal output that rebuilds
// it on a terminal that has just been fully reset and resized to
// rows×cols (PROTOCOL.md §8): scrollback, normal screen, saved cursors,
// scroll regions, alternate screen when active, cursor, pen, charsets,
// modes, title, colours and tab stops.
// snapYield is how many lines the snapshot writes between yields.
const snapYield = 256

func (e *emulator) snapshot() string { return string(e.appendSnapshot(nil)) }

// appendSnapshot writes the snapshot into b's memory (b's length is
// ignored), or into a new buffer when b has too little room, and returns
// it.
func (e *emulator) appendSnapshot(b []byte) []byte { return e.appendSnapshotOf(b, true) }

// appendScreen is appendSnapshot without the scrollback: a recording's
// keyframe.
func (e *emulator) appendScreen(b []byte) []byte { return e.appendSnapshotOf(b, false) }

func (e *emulator) appendSnapshotOf(b []byte, scrollback bool) []byte {
	w := snapWriter{e: e}
	sbLen := e.sb.len()
	if !scrollback {
		sbLen = 0
	}
	// About its length (plain lines exactly), so that a full
	// scrollback's megabyte is not copied as it grows.
	size := 256 + e.rows*(e.cols+16)
	for i := 0; i < sbLen; i++ {
		if l := e.sb.at(i); l.isPlain {
			size += len(l.plain) + 2
		} else {
			size += len(l.cells) + 16
		}
	}
	if w.b = b[:0]; cap(b) < size {
		w.b = make([]byte, 0, size)
	}
	// Scrollback and the normal screen, written top to bottom: the lines
	// beyond the screen height scroll into the viewer's scrollback.
	n := sbLen
	normal := &e.scr[0]
	// Blank rows at the bottom of the screen need not be written: the
	// viewer's screen is blank after the reset.
	last := n + e.rows - 1
	for n == 0 && last >= 0 && isBlankLine(normal.line(last)) {
		last--
	}
	var prevFull bool
	for i := 0; i <= last; i++ {
		if i%snapYield == snapYield-1 {
			// A full scrollback takes milliseconds to write: let the
			// daemon's other goroutines (other terminals' keystrokes)
			// run meanwhile, on its one P.
			runtime.Gosched()
		}
		var line []cell
		var wrapped bool
		if i < n {
			l := e.sb.at(i)
			if l.isPlain && w.fg == 0 && w.bg == 0 {
				// Printable ASCII in the default pen, the pen the viewer
				// has here: its bytes are what line would write for its
				// cells, without decoding them (most of a scrollback).
				text := l.plain[:min(len(l.plain), e.cols)]
				if i > 0 && !(l.wrapped && prevFull && len(text) > 0) {
					w.str("\r\n")
				}
				w.b = append(w.b, text...)
				prevFull = len(text) >= e.cols
				continue
			}
			line, wrapped = l.line(&w.scratch), l.wrapped
		} else {
			line, wrapped = normal.line(i-n), normal.wrapped[i-n]
		}
		if len(line) > e.cols {
			line = line[:e.cols]
		}
		if i > 0 {
			w.resetPen()
			if !(wrapped && prevFull && len(line) > 0 && startsPrintable(line[0])) {
				w.str("\r\n")
			}
		}
		prevFull = w.line(line)
	}
	w.savedCursor(&normal.saved)
	w.region(normal)
	if e.alt {
		alt := &e.scr[1]
		w.resetPen()
		w.str("\x1b[?1047h\x1b[H")
		w.screenRows(alt)
		w.savedCursor(&alt.saved)
		w.region(alt)
	}
	if e.tabsCustom() {
		w.str("\x1b[3g")
		for x, t := range e.tabs {
			if t {
				w.csi(x+1, 'G')
				w.str("\x1bH")
			}
		}
	}
	// Cursor: origin mode first (setting it homes the cursor), then the
	// position, re-printing the last cell when a wrap is pending.
	if e.origin {
		w.str("\x1b[?6h")
	}
	top := 0
	if e.origin {
		top = e.cur().top
	}
	line := e.cur().line(e.y)
	switch {
	case e.pending && e.x == e.cols-1 && line[e.x].ch > 0:
		w.cup(e.y-top, e.x)
		w.cell(line[e.x])
	case e.pending && e.x == e.cols-1 && e.x > 0 && line[e.x].ch == tailRune && line[e.x-1].ch > 0:
		w.cup(e.y-top, e.x-1)
		w.cell(line[e.x-1])
	case e.pending && e.x == e.cols-1 && uniformErase(line):
		// Print in the last column, then erase the whole line with its
		// background: the wrap stays pending (EL 1 keeps it, as in xterm.js).
		w.cup(e.y-top, e.x)
		w.str(" ")
		w.pen(0, line[0].bg)
		w.str("\x1b[1K")
	default:
		w.cup(e.y-top, e.x)
	}
	w.pen(e.fg, e.bg)
	w.charsets(e.charsets, e.gl)
	// Modes (all defaults are off except autowrap and cursor visibility).
	modes := [...]struct {
		on bool
		s  string
	}{
		{e.cursorKeys, "\x1b[?1h"},
		{e.keypad, "\x1b="},
		{!e.autowrap, "\x1b[?7l"},
		{e.cursorBlink, "\x1b[?12h"},
		{e.cursorHidden, "\x1b[?25l"},
		{e.insert, "\x1b[4h"},
		{e.lnm, "\x1b[20h"},
		{e.focus, "\x1b[?1004h"},
		{e.bracketedPaste, "\x1b[?2004h"},
	}
	for _, m := range modes {
		if m.on {
			w.str(m.s)
		}
	}
	if e.mouse != 0 {
		w.str("\x1b[?" + strconv.Itoa(e.mouse) + "h")
	}
	if e.mouseEnc != 0 {
		w.str("\x1b[?" + strconv.Itoa(e.mouseEnc) + "h")
	}
	if e.cursorStyle != 0 {
		w.str("\x1b[" + strconv.Itoa(e.cursorStyle) + " q")
	}
	if e.title != "" {
		w.str("\x1b]2;" + e.title + "\x07")
	}
	for i := 0; i < 256; i++ {
		if s, ok := e.palette[i]; ok {
			w.str("\x1b]4;" + strconv.Itoa(i) + ";" + s + "\x07")
		}
	}
	for i, s := range e.dynamic {
		if s != "" {
			w.str("\x1b]" + strconv.Itoa(10+i) + ";" + s + "\x07")
		}
	}
	return w.b
}

// previewMin is the length of snapshot text from which a snapshot's
// terminal/reset carries a preview: below it, a viewer applies the whole
// snapshot about as fast as it would draw the preview.
const previewMin = 64 << 10

// preview draws the screen a snapshot ends on (the alternate screen when it
// is active) from the top-left corner of a blank screen, then places the
// cursor and hides it if it is hidden, and leaves the pen and charsets at
// their defaults. A viewer can show it while it applies a long snapshot:
// PROTOCOL.md §8's terminal/reset carries it as preview
// (docs/protocol-decisions.md, "A preview of the screen before a long
// snapshot"). It is display only: a viewer draws it on its alternate
// screen and leaves that before the snapshot, so nothing of it stays.
func (e *emulator) preview() string {
	w := snapWriter{e: e}
	s := e.cur()
	w.b = make([]byte, 0, e.rows*(e.cols+4)+16)
	w.screenRows(s)
	w.resetPen()
	w.cup(e.y, e.x)
	if e.cursorHidden {
		w.str("\x1b[?25l") // the viewer shows it again before the snapshot
	}
	return string(w.b)
}

// screenRows writes s's rows from the cursor's row (the top, at column 0)
// down to the last that is not blank, a wrapped row joined to the one
// before it as the output did.
func (w *snapWriter) screenRows(s *screen) {
	last := w.e.rows - 1
	for last > 0 && isBlankLine(s.line(last)) {
		last--
	}
	prevFull := false
	for y := 0; y <= last; y++ {
		if y > 0 {
			w.resetPen()
			if !(s.wrapped[y] && prevFull && startsPrintable(s.line(y)[0])) {
				w.str("\r\n")
			}
		}
		prevFull = w.line(s.line(y))
	}
}

func (e *emulator) tabsCustom() bool {
	for x, t := range e.tabs {
		if t != (x > 0 && x%8 == 0) {
			return true
		}
	}
	return false
}

// uniformErase reports whether every cell of l is the same plain erased cell.
func uniformErase(l []cell) bool {
	for _, c := range l {
		if c != l[0] || c.ch != 0 || !isPlainErase(c) {
			return false
		}
	}
	return true
}

func isBlankLine(l []cell) bool {
	for _, c := range l {
		if c != (cell{}) {
			return false
		}
	}
	return true
}

// startsPrintable reports whether c is written as a character (so that
// printing it performs a pending autowrap).
func startsPrintable(c cell) bool { return c.ch > 0 }

type snapWriter struct {
	e       *emulator
	b       []byte
	scratch []cell  // a decoded scrollback line
	fg, bg  uint32  // pen of the viewer being rebuilt
	cs      [4]byte // its designated charsets (0 = ASCII)
	gl      int     // and which is invoked into GL
}

func (w *snapWriter) str(s string) { w.b = append(w.b, s...) }

func (w *snapWriter) csi(n int, final byte) {
	w.b = append(w.b, 0x1b, '[')
	w.b = strconv.AppendInt(w.b, int64(n), 10)
	w.b = append(w.b, final)
}

func (w *snapWriter) cup(row, col int) {
	w.b = append(w.b, 0x1b, '[')
	w.b = strconv.AppendInt(w.b, int64(row+1), 10)
	w.b = append(w.b, ';')
	w.b = strconv.AppendInt(w.b, int64(col+1), 10)
	w.b = append(w.b, 'H')
}

func (w *snapWriter) resetPen() {
	if w.fg != 0 || w.bg != 0 {
		w.str("\x1b[m")
		w.fg, w.bg = 0, 0
	}
}

func (w *snapWriter) pen(fg, bg uint32) {
	bg &^= aWide
	if fg == w.fg && bg == w.bg {
		return
	}
	w.b = appendSGR(w.b, fg, bg)
	w.fg, w.bg = fg, bg
}

// appendSGR appends an absolute SGR sequence (starting with 0) for a pen.
func appendSGR(b []byte, fg, bg uint32) []byte {
	b = append(b, "\x1b["...)
	b = appendSGRParams(b, fg, bg)
	return append(b, 'm')
}

func appendSGRParams(b []byte, fg, bg uint32) []byte {
	b = append(b, '0')
	flags := [...]struct {
		on bool
		s  string
	}{
		{fg&aBold != 0, ";1"}, {fg&aDim != 0, ";2"}, {fg&aItalic != 0, ";3"},
		{fg&aBlink != 0, ";5"}, {fg&aInverse != 0, ";7"}, {fg&aHidden != 0, ";8"},
		{bg&aStrike != 0, ";9"}, {bg&aOverline != 0, ";53"},
	}
	for _, f := range flags {
		if f.on {
			b = append(b, f.s...)
		}
	}
	switch ul := (bg & ulMask) >> ulShift; ul {
	case 0:
	case 1:
		b = append(b, ";4"...)
	default:
		b = append(b, ";4:"...)
		b = strconv.AppendInt(b, int64(ul), 10)
	}
	b = appendColor(b, fg, 30, 90, "38")
	b = appendColor(b, bg, 40, 100, "48")
	return b
}

func appendColor(b []byte, c uint32, base, bright int, ext string) []byte {
	v := c & colorMask
	switch c & cmMask {
	case cmIndexed:
		b = append(b, ';')
		switch {
		case v < 8:
			b = strconv.AppendInt(b, int64(base+int(v)), 10)
		case v < 16:
			b = strconv.AppendInt(b, int64(bright+int(v)-8), 10)
		default:
			b = append(b, ext...)
			b = append(b, ";5;"...)
			b = strconv.AppendInt(b, int64(v), 10)
		}
	case cmRGB:
		b = append(b, ';')
		b = append(b, ext...)
		b = append(b, ";2;"...)
		b = strconv.AppendInt(b, int64(v>>16&0xFF), 10)
		b = append(b, ';')
		b = strconv.AppendInt(b, int64(v>>8&0xFF), 10)
		b = append(b, ';')
		b = strconv.AppendInt(b, int64(v&0xFF), 10)
	}
	return b
}

func (w *snapWriter) cell(c cell) {
	w.pen(c.fg, c.bg)
	switch {
	case c.ch > 0 && c.ch < utf8.RuneSelf:
		w.b = append(w.b, byte(c.ch))
	case c.ch > 0 && c.ch < clusterBase:
		w.b = utf8.AppendRune(w.b, c.ch)
	default:
		w.b = append(w.b, w.e.cellText(c.ch)...)
	}
}

// isPlainErase reports whether an empty cell is exactly what ECH leaves
// with some pen (only a background colour).
func isPlainErase(c cell) bool { return c.fg == 0 && c.bg&^(cmMask|colorMask) == 0 }

// line writes one line starting at column 0 of the current row. It returns
// whether the last column was written with a character (so a wrap is
// pending at its end).
func (w *snapWriter) line(line []cell) bool {
	cols := w.e.cols
	n := len(line)
	x := 0   // next column to write
	cur := 0 // viewer cursor column
	full := false
	var special []int
	for x < n {
		c := line[x]
		if c.ch > 0 {
			if cur != x {
				w.csi(x+1, 'G')
				cur = x
			}
			w.cell(c)
			step := 1
			if c.bg&aWide != 0 && x+1 < n {
				step = 2
			}
			x += step
			cur = x
			if x >= cols {
				full = true
				cur = cols - 1
			}
			continue
		}
		// A run of empty cells (erased cells and orphaned halves).
		j := x + 1
		for j < n && line[j].ch <= 0 && line[j].bg == c.bg && line[j].fg == c.fg {
			j++
		}
		if !isPlainErase(c) || c.ch == tailRune {
			for k := x; k < j; k++ {
				special = append(special, k)
			}
		}
		if c.bg&(cmMask|colorMask) != 0 {
			if cur != x {
				w.csi(x+1, 'G')
				cur = x
			}
			w.pen(0, c.bg&(cmMask|colorMask))
			w.csi(j-x, 'X')
		}
		x = j
	}
	for _, k := range special {
		w.fixEmpty(line, k)
	}
	if len(special) > 0 {
		full = false
	}
	return full
}

// fixEmpty recreates an empty cell that carries attributes beyond a
// background colour (left behind when a wide character was cut, as xterm.js
// does): print a wide character over k and k+1, then a space over its
// second half with the cell's pen, which blanks k with that pen; then
// restore k+1.
func (w *snapWriter) fixEmpty(line []cell, k int) {
	cols := w.e.cols
	if cols < 3 {
		return
	}
	c := line[k]
	w.pen(c.fg, c.bg&^aWide)
	var other int
	if k < cols-1 {
		// A wide character over k and k+1, then a narrow one over its
		// second half: k is blanked with the pen.
		w.csi(k+1, 'G')
		w.str("\u4e00")
		w.csi(k+2, 'G')
		w.str(" ")
		other = k + 1
	} else {
		// A wide character over k-1 and k, then a narrow one over its
		// first half: k is blanked with the pen.
		w.csi(k, 'G')
		w.str("\u4e00")
		w.csi(k, 'G')
		w.str(" ")
		other = k - 1
	}
	// Restore the neighbour that the trick overwrote.
	o := cell{}
	if other < len(line) {
		o = line[other]
	}
	w.csi(other+1, 'G')
	switch {
	case o.ch > 0:
		w.cell(o)
	case o.ch == tailRune && other > 0:
		w.csi(other, 'G')
		w.cell(line[other-1])
	default:
		w.pen(0, o.bg&(cmMask|colorMask))
		w.csi(1, 'X')
	}
}

func (w *snapWriter) region(s *screen) {
	if s.top != 0 || s.bot != w.e.rows-1 {
		w.b = append(w.b, 0x1b, '[')
		w.b = strconv.AppendInt(w.b, int64(s.top+1), 10)
		w.b = append(w.b, ';')
		w.b = strconv.AppendInt(w.b, int64(s.bot+1), 10)
		w.b = append(w.b, 'r')
	}
}

func (w *snapWriter) savedCursor(s *savedCursor) {
	if *s == (savedCursor{}) {
		// The viewer's saved cursor after a reset is already this.
		return
	}
	w.cup(s.y, s.x)
	w.pen(s.fg, s.bg)
	w.charsets(s.charsets, s.gl)
	w.str("\x1b7")
	w.charsets([4]byte{}, 0)
}

func (w *snapWriter) charsets(cs [4]byte, gl int) {
	for i, c := range cs {
		if c == 'B' {
			c = 0
		}
		if c != w.cs[i] {
			d := c
			if d == 0 {
				d = 'B'
			}
			w.b = append(w.b, 0x1b, "()*+"[i], d)
			w.cs[i] = c
		}
	}
	if gl != w.gl {
		switch gl {
		case 0:
			w.b = append(w.b, 0x0f)
		case 1:
			w.b = append(w.b, 0x0e)
		case 2:
			w.str("\x1bn")
		case 3:
			w.str("\x1bo")
		}
		w.gl = gl
	}
}

// --- query answers ---

// answer returns the reply to a terminal query (as recognized by the
// filter), computed from the current state, or nil when it needs none.
func (e *emulator) answer(raw string) []byte {
	kind, body := splitIntro(raw)
	switch kind {
	case 'C':
		return e.answerCSI(body)
	case 'P':
		return e.answerDCS(body)
	case ']':
		return e.answerOSC(body)
	}
	return nil
}

// splitIntro strips the introducer (7-bit or C1) of a sequence.
func splitIntro(raw string) (byte, string) {
	switch {
	case strings.HasPrefix(raw, "\x1b["), strings.HasPrefix(raw, "\u009b"):
		return 'C', raw[2:]
	case strings.HasPrefix(raw, "\x1bP"), strings.HasPrefix(raw, "\u0090"):
		return 'P', raw[2:]
	case strings.HasPrefix(raw, "\x1b]"), strings.HasPrefix(raw, "\u009d"):
		return ']', raw[2:]
	}
	return 0, raw
}

// parseCSI splits a CSI body into private marker, numeric parameters,
// intermediate and final byte.
func parseCSI(body string) (prefix byte, params []int, inter byte, final byte) {
	if body == "" {
		return
	}
	final = body[len(body)-1]
	body = body[:len(body)-1]
	if body != "" && body[0] >= 0x3C && body[0] <= 0x3F {
		prefix, body = body[0], body[1:]
	}
	for len(body) > 0 && body[len(body)-1] >= 0x20 && body[len(body)-1] <= 0x2F {
		inter, body = body[len(body)-1], body[:len(body)-1]
	}
	if body == "" {
		return
	}
	for _, p := range strings.Split(body, ";") {
		n, _ := atoi(p)
		params = append(params, n)
	}
	return
}

func (e *emulator) answerCSI(body string) []byte {
	prefix, params, inter, final := parseCSI(body)
	p0 := 0
	if len(params) > 0 {
		p0 = params[0]
	}
	row, col := e.y+1, min(e.x, e.cols-1)+1
	switch {
	case final == 'c' && prefix == 0 && inter == 0 && p0 == 0:
		return []byte("\x1b[?1;2c") // as xterm.js: VT100 with advanced video
	case final == 'c' && prefix == '>' && inter == 0 && p0 == 0:
		return []byte("\x1b[>0;276;0c") // as xterm.js
	case final == 'n' && prefix == 0 && inter == 0 && p0 == 5:
		return []byte("\x1b[0n")
	case final == 'n' && prefix == 0 && inter == 0 && p0 == 6:
		return []byte("\x1b[" + strconv.Itoa(row) + ";" + strconv.Itoa(col) + "R")
	case final == 'n' && prefix == '?' && inter == 0 && p0 == 6:
		return []byte("\x1b[?" + strconv.Itoa(row) + ";" + strconv.Itoa(col) + "R")
	case final == 'p' && inter == '$' && (prefix == 0 || prefix == '?'):
		v := e.modeValue(prefix == '?', p0)
		pm := ""
		if prefix == '?' {
			pm = "?"
		}
		return []byte("\x1b[" + pm + strconv.Itoa(p0) + ";" + strconv.Itoa(v) + "$y")
	case final == 'q' && prefix == '>' && inter == 0 && p0 == 0:
		return []byte("\x1bP>|ahpd\x1b\\")
	}
	return nil
}

// modeValue is the DECRPM value of a mode: 0 not recognized, 1 set, 2 reset.
func (e *emulator) modeValue(dec bool, m int) int {
	b := func(on bool) int {
		if on {
			return 1
		}
		return 2
	}
	if !dec {
		switch m {
		case 4:
			return b(e.insert)
		case 20:
			return b(e.lnm)
		}
		return 0
	}
	switch m {
	case 1:
		return b(e.cursorKeys)
	case 6:
		return b(e.origin)
	case 7:
		return b(e.autowrap)
	case 12:
		return b(e.cursorBlink)
	case 25:
		return b(!e.cursorHidden)
	case 47, 1047, 1049:
		return b(e.alt)
	case 66:
		return b(e.keypad)
	case 9, 1000, 1002, 1003:
		return b(e.mouse == m)
	case 1004:
		return b(e.focus)
	case 1005, 1006, 1015, 1016:
		return b(e.mouseEnc == m)
	case 2004:
		return b(e.bracketedPaste)
	}
	return 0
}

func (e *emulator) answerDCS(body string) []byte {
	// body: "$q" Pt terminator (ESC \ or C1 ST, or nothing if cut).
	pt := strings.TrimPrefix(body, "$q")
	pt = strings.TrimSuffix(strings.TrimSuffix(pt, "\x1b\\"), "\u009c")
	pt = strings.TrimSuffix(pt, "\x1b")
	var v string
	switch pt {
	case "m":
		v = string(appendSGRParams(nil, e.fg, e.bg)) + "m"
	case "r":
		s := e.cur()
		v = strconv.Itoa(s.top+1) + ";" + strconv.Itoa(s.bot+1) + "r"
	case " q":
		st := e.cursorStyle
		if st == 0 {
			st = 1
		}
		v = strconv.Itoa(st) + " q"
	case "\"q":
		v = "0\"q"
	case "\"p":
		v = "61;1\"p"
	default:
		return []byte("\x1bP0$r\x1b\\")
	}
	return []byte("\x1bP1$r" + v + "\x1b\\")
}

func (e *emulator) answerOSC(body string) []byte {
	term := "\x1b\\"
	switch {
	case strings.HasSuffix(body, "\x07"):
		term = "\x07"
		body = body[:len(body)-1]
	case strings.HasSuffix(body, "\u009c"):
		body = body[:len(body)-2]
	case strings.HasSuffix(body, "\x1b\\"):
		body = body[:len(body)-2]
	case strings.HasSuffix(body, "\x1b"):
		body = body[:len(body)-1]
	}
	parts := splitSemi(body)
	num, ok := atoi(parts[0])
	if !ok {
		return nil
	}
	var out []byte
	switch num {
	case 4:
		for k := 1; k+1 < len(parts); k += 2 {
			idx, ok := atoi(parts[k])
			if !ok || idx > 255 || parts[k+1] != "?" {
				continue
			}
			out = append(out, "\x1b]4;"+strconv.Itoa(idx)+";"+e.paletteSpec(idx)+term...)
		}
	case 10, 11, 12:
		for k := 1; k < len(parts) && num-10+k-1 <= 2; k++ {
			if parts[k] != "?" {
				continue
			}
			d := num - 10 + k - 1
			out = append(out, "\x1b]"+strconv.Itoa(10+d)+";"+e.dynamicSpec(d)+term...)
		}
	}
	return out
}

// Default colours are xterm.js's default theme.
var ansi16 = [16]uint32{
	0x2e3436, 0xcc0000, 0x4e9a06, 0xc4a000, 0x3465a4, 0x75507b, 0x06989a, 0xd3d7cf,
	0x555753, 0xef2929, 0x8ae234, 0xfce94f, 0x729fcf, 0xad7fa8, 0x34e2e2, 0xeeeeec,
}

func defaultPalette(i int) uint32 {
	switch {
	case i < 16:
		return ansi16[i]
	case i < 232:
		i -= 16
		v := [6]uint32{0, 0x5f, 0x87, 0xaf, 0xd7, 0xff}
		return v[i/36]<<16 | v[i/6%6]<<8 | v[i%6]
	default:
		g := uint32(8 + 10*(i-232))
		return g<<16 | g<<8 | g
	}
}

func (e *emulator) paletteSpec(i int) string {
	if s, ok := e.palette[i]; ok {
		if c, ok := parseColor(s); ok {
			return xrgb(c)
		}
	}
	return xrgb(defaultPalette(i))
}

func (e *emulator) dynamicSpec(d int) string {
	if c, ok := parseColor(e.dynamic[d]); ok {
		return xrgb(c)
	}
	if d == 1 {
		return xrgb(0x000000)
	}
	return xrgb(0xffffff)
}

func xrgb(c uint32) string {
	h := func(v uint32) string {
		const hex = "0123456789abcdef"
		b := []byte{hex[v>>4], hex[v&15], hex[v>>4], hex[v&15]}
		return string(b)
	}
	return "rgb:" + h(c>>16&0xFF) + "/" + h(c>>8&0xFF) + "/" + h(c&0xFF)
}

// parseColor understands #rgb, #rrggbb and rgb:r/g/b (1–4 hex digits each).
func parseColor(s string) (uint32, bool) {
	hexv := func(s string) (uint32, bool) {
		if s == "" || len(s) > 4 {
			return 0, false
		}
		v, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			return 0, false
		}
		// Scale to 8 bits.
		max := uint64(1)<<(4*len(s)) - 1
		return uint32(v * 255 / max), true
	}
	switch {
	case strings.HasPrefix(s, "#") && (len(s) == 4 || len(s) == 7):
		n := (len(s) - 1) / 3
		var c uint32
		for i := 0; i < 3; i++ {
			v, ok := hexv(s[1+i*n : 1+(i+1)*n])
			if !ok {
				return 0, false
			}
			c = c<<8 | v
		}
		return c, true
	case strings.HasPrefix(s, "rgb:"):
		p := strings.Split(s[4:], "/")
		if len(p) != 3 {
			return 0, false
		}
		var c uint32
		for _, x := range p {
			v, ok := hexv(x)
			if !ok {
				return 0, false
			}
			c = c<<8 | v
		}
		return c, true
	}
	return 0, false
}
