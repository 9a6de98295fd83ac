package pty

import (
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Screen is the headless emulator (the model snapshots are taken from)
// for use outside the daemon: `ahpctl attach` feeds it the host's output
// to know the host's cursor and what a cell really holds, so that a
// predicted keystroke echo can be drawn and repaired (issue 40). It adds
// no behaviour of its own. It keeps no scrollback and is not safe for
// concurrent use.
type Screen struct{ e *emulator }

// NewScreen returns a blank screen of rows×cols (each at least 1).
func NewScreen(rows, cols int) *Screen {
	return &Screen{newEmulator(max(rows, 1), max(cols, 1), 0)}
}

// Write applies terminal output; invalid UTF-8 becomes U+FFFD.
func (s *Screen) Write(p string) {
	if !utf8.ValidString(p) {
		p = strings.ToValidUTF8(p, "\uFFFD")
	}
	s.e.write(p)
}

// WriteBytes is Write without copying p (attach feeds it every output
// chunk): the emulator keeps nothing of its input but copies (cells,
// clusters, OSC payloads), so p may be reused once WriteBytes returns.
func (s *Screen) WriteBytes(p []byte) {
	s.Write(unsafe.String(unsafe.SliceData(p), len(p)))
}

// Reset makes s a blank rows×cols screen (terminal/reset: a snapshot
// follows).
func (s *Screen) Reset(rows, cols int) { *s = *NewScreen(rows, cols) }

// Resize changes the size as the host's emulator does (terminal/resize).
func (s *Screen) Resize(rows, cols int) { s.e.resize(max(rows, 1), max(cols, 1)) }

// Size returns the screen's rows and columns.
func (s *Screen) Size() (rows, cols int) { return s.e.rows, s.e.cols }

// Cursor returns the cursor's column and row (0-based) and whether a wrap
// is pending (a character was printed in the last column).
func (s *Screen) Cursor() (x, y int, pending bool) { return s.e.x, s.e.y, s.e.pending }

// Ground reports whether the output so far ended outside any escape,
// control or string sequence: only then may other bytes be written to
// the terminal without landing inside one of the host's.
func (s *Screen) Ground() bool { return s.e.st == stGround }

// Alt reports whether the alternate screen is active.
func (s *Screen) Alt() bool { return s.e.alt }

// Plain reports whether text written now lands as written: ASCII charset,
// no insert mode, no origin mode, autowrap on. Predictions are drawn only
// then.
func (s *Screen) Plain() bool {
	cs := s.e.charsets[s.e.gl]
	return (cs == 0 || cs == 'B') && !s.e.insert && !s.e.origin && s.e.autowrap
}

// Text returns what cell (x, y) shows: "" for an erased cell or the second
// half of a wide character, else its character (with combining marks).
func (s *Screen) Text(x, y int) string {
	if y < 0 || y >= s.e.rows || x < 0 || x >= s.e.cols {
		return ""
	}
	c := s.e.cur().line(y)[x]
	if c.ch == tailRune {
		return ""
	}
	return s.e.cellText(c.ch)
}

// Wide reports whether cell (x, y) is either half of a wide character.
func (s *Screen) Wide(x, y int) bool {
	if y < 0 || y >= s.e.rows || x < 0 || x >= s.e.cols {
		return false
	}
	c := s.e.cur().line(y)[x]
	return c.ch == tailRune || c.bg&aWide != 0
}

// AppendCell appends what redraws cell (x, y) at the terminal's cursor:
// an absolute SGR for the cell's attributes and its character (a space
// for an erased cell). The second half of a wide character appends
// nothing: redraw the cell before it.
func (s *Screen) AppendCell(b []byte, x, y int) []byte {
	if y < 0 || y >= s.e.rows || x < 0 || x >= s.e.cols {
		return b
	}
	c := s.e.cur().line(y)[x]
	if c.ch == tailRune {
		return b
	}
	b = appendSGR(b, c.fg, c.bg&^aWide)
	if c.ch <= 0 {
		return append(b, ' ')
	}
	return append(b, s.e.cellText(c.ch)...)
}

// AppendPen appends an absolute SGR for the current pen.
func (s *Screen) AppendPen(b []byte) []byte { return appendSGR(b, s.e.fg, s.e.bg&^aWide) }

// AppendRestore appends what brings a terminal that shows this screen's
// cells, but whose cursor, pen or last printed character other writes
// changed, back to this screen's cursor (a pending wrap included), pen
// and the character REP repeats: the cell before the cursor (under it,
// when a wrap is pending) is printed again when that is where the last
// character went.
func (s *Screen) AppendRestore(b []byte) []byte {
	e := s.e
	fg, bg := e.fg, e.bg&^aWide
	at := -1
	switch {
	case e.pending:
		at = e.x
	case e.lastChar != 0 && e.x > 0:
		at = e.x - 1
	}
	if at >= 0 {
		line := e.cur().line(e.y)
		if line[at].ch == tailRune && at > 0 {
			at--
		}
		c := line[at]
		text := e.cellText(c.ch)
		if text == "" {
			text = " "
		}
		b = AppendCUP(b, at, e.y)
		if c.fg == fg && c.bg&^aWide == bg && (e.pending || c.ch == e.lastChar) {
			b = appendSGR(b, fg, bg)
			return append(b, text...)
		}
		if e.pending {
			b = appendSGR(b, c.fg, c.bg&^aWide)
			b = append(b, text...)
			return appendSGR(b, fg, bg)
		}
	}
	b = AppendCUP(b, e.x, e.y)
	return appendSGR(b, fg, bg)
}

// AppendCUP appends a cursor position sequence (CUP) for 0-based x, y.
func AppendCUP(b []byte, x, y int) []byte {
	b = append(b, "\x1b["...)
	b = strconv.AppendInt(b, int64(y+1), 10)
	b = append(b, ';')
	b = strconv.AppendInt(b, int64(x+1), 10)
	return append(b, 'H')
}

// RuneWidth is the number of cells the emulator gives r (0 for a
// combining mark).
func RuneWidth(r rune) int { return runeWidth(r) }
