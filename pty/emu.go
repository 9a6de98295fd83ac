package pty

import (
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// The headless emulator: an xterm.js-compatible model of screen, scrollback,
// cursor, pen, modes and title, kept so that a viewer can be given a
// snapshot (PROTOCOL.md §8). It is not safe for concurrent use; the
// Terminal guards it with emuMu. See doc.go for why it is not
// github.com/charmbracelet/x/vt.

// Cell attribute packing, close to xterm.js's AttributeData: fg and bg each
// hold a 24-bit colour value, a 2-bit colour mode and 6 flag bits.
const (
	colorMask = 0x00FFFFFF
	cmShift   = 24
	cmMask    = 3 << cmShift
	cmIndexed = 1 << cmShift
	cmRGB     = 2 << cmShift

	// fg flags.
	aBold    = 1 << 26
	aDim     = 1 << 27
	aItalic  = 1 << 28
	aBlink   = 1 << 29
	aInverse = 1 << 30
	aHidden  = 1 << 31
	// bg flags.
	aStrike   = 1 << 26
	aOverline = 1 << 27
	ulShift   = 28
	ulMask    = 7 << ulShift // underline style: 0 none, 1 single, 2 double, 3 curly, 4 dotted, 5 dashed
	aWide     = 1 << 31      // cell only: first half of a wide character
)

const (
	tailRune    rune = -1       // second half of a wide character
	clusterBase rune = 0x110000 // ch >= clusterBase: index into emulator.clusters
	maxClusters      = 1 << 16  // bound on distinct base+combining clusters
	maxOSC           = 4096     // bound on a collected OSC payload, in bytes
	maxParams        = 32
)

// cell is one screen position. ch 0 is an erased cell.
type cell struct {
	ch     rune
	fg, bg uint32
}

// savedCursor is what DECSC saves (per screen, as in xterm.js).
type savedCursor struct {
	x, y     int
	fg, bg   uint32
	charsets [4]byte
	gl       int
}

type screen struct {
	lines    []*row
	wrapped  []bool // wrapped[y]: line y continues line y-1 (autowrap)
	base     []*row // the arrays lines and wrapped slide over (see slide)
	wbase    []bool
	top, bot int // scroll region, inclusive rows
	saved    savedCursor
}

// line returns the cells of row y, up to date.
func (s *screen) line(y int) []cell { return s.lines[y].line() }

// row is one line of a screen: its cells, or, while plain is set, text,
// printable ASCII in the default pen followed by erased cells, with cells
// out of date until line() rewrites them. Most output that scrolls by is
// such lines: printing them as bytes and pushing them to the scrollback as
// bytes costs a twelfth of the memory traffic of cells (docs/benchmarks.md,
// issue 17). Anything else done to a row makes it cells first.
type row struct {
	cells []cell // len cols
	text  []byte // while plain; cap cols once printed into
	plain bool
}

// line returns r's cells, rewriting them from a plain row's text first.
func (r *row) line() []cell {
	if r.plain {
		c := r.cells
		for i, b := range r.text {
			c[i] = cell{ch: rune(b)}
		}
		clear(c[len(r.text):])
		r.plain = false
		r.text = r.text[:0]
	}
	return r.cells
}

// erase sets every cell of r to blank; an erase in the default background
// leaves an empty plain row, unless the emulator keeps cells only.
func (e *emulator) erase(r *row, blank cell) {
	r.text = r.text[:0]
	if blank == (cell{}) && !e.cellsOnly {
		r.plain = true
		return
	}
	r.plain = false
	fill(r.cells, blank)
}

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

// Mouse tracking protocols (DEC private mode numbers; 0 = off).
// Mouse encodings: 0 default, 1005, 1006, 1015, 1016.

type emulator struct {
	rows, cols int
	scr        [2]screen
	cellsOnly  bool // no plain rows, no shortcuts: the tests' reference for them
	alt        bool
	sb         scrollback

	x, y    int
	pending bool // pending wrap: a character was printed in the last column
	fg, bg  uint32

	// Modes.
	cursorKeys     bool // DECCKM ?1
	keypad         bool // DECKPAM / DECNKM ?66
	origin         bool // DECOM ?6
	autowrap       bool // DECAWM ?7
	cursorBlink    bool // ?12
	cursorHidden   bool // DECTCEM ?25 reset
	insert         bool // IRM 4
	lnm            bool // LNM 20
	focus          bool // ?1004
	bracketedPaste bool // ?2004
	mouse          int  // 0, 9, 1000, 1002, 1003
	mouseEnc       int  // 0, 1005, 1006, 1015, 1016
	cursorStyle    int  // DECSCUSR parameter

	title    string
	charsets [4]byte // '0' DEC special graphics, 'A' UK, 'B' (or 0) ASCII
	gl       int
	tabs     []bool
	palette  map[int]string // OSC 4 overrides
	dynamic  [3]string      // OSC 10, 11, 12 overrides

	lastChar rune // for REP; 0 when the previous action was not a print

	clusters   []string
	clusterIdx map[string]rune

	// Parser.
	st       uint8
	params   [maxParams]int32
	sub      [maxParams]bool // params[i] was introduced by ':'
	nparams  int
	inParam  bool
	prefix   byte
	inter    byte
	osc      []byte
	oscLong  bool
	dcsFinal byte
}

func newEmulator(rows, cols, scrollbackLines int) *emulator {
	return newEmulatorRows(rows, cols, scrollbackLines, false)
}

// newEmulatorRows is newEmulator; with cellsOnly it keeps no plain row and
// takes no shortcut, the reference the tests hold plain rows to.
func newEmulatorRows(rows, cols, scrollbackLines int, cellsOnly bool) *emulator {
	e := &emulator{rows: rows, cols: cols, cellsOnly: cellsOnly}
	e.sb.max = scrollbackLines
	e.scr[0] = newScreen(rows, cols, !cellsOnly)
	e.scr[1] = newScreen(rows, cols, !cellsOnly)
	e.autowrap = true
	e.resetTabs()
	return e
}

func newScreen(rows, cols int, plain bool) screen {
	s := screen{lines: make([]*row, rows), wrapped: make([]bool, rows), top: 0, bot: rows - 1}
	backing := make([]cell, rows*cols)
	rs := make([]row, rows)
	for y := range s.lines {
		rs[y] = row{cells: backing[y*cols : (y+1)*cols : (y+1)*cols], plain: plain}
		s.lines[y] = &rs[y]
	}
	return s
}

func (e *emulator) cur() *screen {
	if e.alt {
		return &e.scr[1]
	}
	return &e.scr[0]
}

func (e *emulator) resetTabs() {
	e.tabs = make([]bool, e.cols)
	for i := 8; i < e.cols; i += 8 {
		e.tabs[i] = true
	}
}

// eraseCell is the cell erase operations leave: the pen's background colour
// only (xterm.js _eraseAttrData).
func (e *emulator) eraseCell() cell {
	return cell{bg: e.bg & (cmMask | colorMask)}
}

// write parses s, which must be valid UTF-8.
func (e *emulator) write(s string) {
	for i := 0; i < len(s); {
		c := s[i]
		if e.st == stGround {
			if c >= 0x20 && c < 0x7F {
				j := printableEnd(s, i+1)
				e.printASCII(s[i:j])
				i = j
				continue
			}
			// CR and LF, which end every line, without the state table:
			// what transition does for them in the ground state.
			if (c == '\r' || c == '\n') && !e.cellsOnly {
				e.pending = false
				if c == '\r' {
					e.x = 0
				} else {
					e.index()
					if e.lnm {
						e.x = 0
					}
				}
				e.lastChar = 0
				i++
				continue
			}
			if c >= 0x80 {
				r, n := utf8.DecodeRuneInString(s[i:])
				i += n
				if r >= 0xA0 {
					e.printRune(r)
					continue
				}
				e.transition(byte(r), r)
				continue
			}
			e.transition(c, rune(c))
			i++
			continue
		}
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			i += n
			cls := byte(clsHigh)
			if r < 0xA0 {
				cls = byte(r)
			}
			e.transition(cls, r)
			continue
		}
		e.transition(c, rune(c))
		i++
	}
}

// transition runs one step of the shared state machine for class cls
// (byte, C1 code or clsHigh) whose code point is r.
func (e *emulator) transition(cls byte, r rune) {
	v := vtTable[e.st][cls]
	act, next := uint8(v>>8), uint8(v)
	prev := e.st
	switch act {
	case acPrint:
		if r < 0x80 {
			e.printASCII(string(rune(r)))
		} else {
			e.printRune(r)
		}
	case acExecute:
		e.execute(r)
	case acCollect:
		if e.st == stCsiEntry || e.st == stDcsEntry {
			if cls >= 0x3C && cls <= 0x3F {
				e.prefix = cls
				break
			}
		}
		e.inter = cls
	case acParam:
		e.param(cls)
	case acEscDispatch:
		e.escDispatch(cls)
	case acCsiDispatch:
		if e.inParam || e.nparams > 0 {
			e.pushParam()
		}
		e.csiDispatch(cls)
	case acOscPut:
		if len(e.osc) < maxOSC {
			e.osc = utf8.AppendRune(e.osc, r)
		} else {
			e.oscLong = true
		}
	case acOscEnd:
		e.oscDispatch()
	case acHook:
		e.dcsFinal = cls
	}
	e.st = next
	if next != prev || act == acClear || act == acOscStart {
		switch next {
		case stEsc, stCsiEntry, stDcsEntry:
			e.clearSeq()
		case stOsc:
			e.osc = e.osc[:0]
			e.oscLong = false
		}
	}
	if act != acPrint && act != acNone && act != acIgnore && !(act == acCsiDispatch && cls == 'b') {
		e.lastChar = 0
	}
}

func (e *emulator) clearSeq() {
	e.nparams = 0
	e.inParam = false
	e.prefix = 0
	e.inter = 0
	e.params[0] = -1
	e.sub[0] = false
}

func (e *emulator) param(c byte) {
	switch {
	case c >= '0' && c <= '9':
		if e.nparams >= maxParams {
			return
		}
		p := &e.params[e.nparams]
		if !e.inParam {
			*p = 0
			e.inParam = true
		} else if *p < 0 {
			*p = 0
		}
		if *p < 100000 {
			*p = *p*10 + int32(c-'0')
		}
	case c == ';' || c == ':':
		e.pushParam()
		if e.nparams < maxParams {
			e.params[e.nparams] = -1
			e.sub[e.nparams] = c == ':'
		}
	}
}

func (e *emulator) pushParam() {
	if e.nparams < maxParams {
		if !e.inParam {
			e.params[e.nparams] = -1
		}
		e.nparams++
	}
	e.inParam = false
}

// p returns parameter i, or def when it is missing or zero (as most
// sequences treat 0).
func (e *emulator) p(i int, def int) int {
	if i >= e.nparams || e.params[i] <= 0 {
		return def
	}
	return int(e.params[i])
}

// p0 returns parameter i with 0 kept as 0; def when missing.
func (e *emulator) p0(i int, def int) int {
	if i >= e.nparams || e.params[i] < 0 {
		return def
	}
	return int(e.params[i])
}

// --- printing ---

var decSpecial = map[byte]rune{
	'_': ' ', '`': '◆', 'a': '▒', 'b': '␉', 'c': '␌', 'd': '␍', 'e': '␊', 'f': '°',
	'g': '±', 'h': '␤', 'i': '␋', 'j': '┘', 'k': '┐', 'l': '┌', 'm': '└', 'n': '┼',
	'o': '⎺', 'p': '⎻', 'q': '─', 'r': '⎼', 's': '⎽', 't': '├', 'u': '┤', 'v': '┴',
	'w': '┬', 'x': '│', 'y': '≤', 'z': '≥', '{': 'π', '|': '≠', '}': '£', '~': '·',
}

func (e *emulator) mapCharset(c byte) rune {
	switch e.charsets[e.gl] {
	case '0':
		if r, ok := decSpecial[c]; ok {
			return r
		}
	case 'A':
		if c == '#' {
			return '£'
		}
	}
	return rune(c)
}

// printASCII prints a run of printable ASCII.
func (e *emulator) printASCII(s string) {
	cs := e.charsets[e.gl]
	if (cs != 0 && cs != 'B') || e.insert {
		for i := 0; i < len(s); i++ {
			e.printRune(e.mapCharset(s[i]))
		}
		return
	}
	scr := e.cur()
	fg, bg := e.fg, e.bg&^aWide
	plainPen := fg == 0 && bg == 0 && !e.cellsOnly
	for i := 0; i < len(s); {
		if e.pending {
			if !e.autowrap {
				e.pending = false
			} else {
				e.wrapLine(scr)
			}
		}
		r := scr.lines[e.y]
		if plainPen && r.plain && e.x <= len(r.text) {
			// A plain row stays plain: the text is written as bytes.
			n := min(e.cols-e.x, len(s)-i)
			x := e.x
			if cap(r.text) < e.cols {
				t := make([]byte, len(r.text), e.cols)
				copy(t, r.text)
				r.text = t
			}
			if x+n > len(r.text) {
				r.text = r.text[:x+n]
			}
			copy(r.text[x:], s[i:i+n])
			i += n
			if x += n; x >= e.cols {
				e.x = e.cols - 1
				e.pending = e.autowrap
			} else {
				e.x = x
			}
			continue
		}
		line := r.line()
		// Fix a wide character whose second half is about to be overwritten.
		if line[e.x].ch == tailRune && e.x > 0 {
			line[e.x-1] = cell{fg: fg, bg: bg}
		}
		n := e.cols - e.x
		if n > len(s)-i {
			n = len(s) - i
		}
		x := e.x
		dst, src := line[x:x+n], s[i:i+n]
		for k := range dst {
			dst[k] = cell{ch: rune(src[k]), fg: fg, bg: bg}
		}
		i += n
		x += n
		if x >= e.cols {
			e.x = e.cols - 1
			e.pending = e.autowrap
		} else {
			e.x = x
			// The next cell may be the orphaned second half of a wide character.
			if line[x].ch == tailRune {
				line[x] = cell{fg: fg, bg: bg}
			}
		}
	}
	e.lastChar = rune(s[len(s)-1])
}

// printableEnd returns the index of the first byte of s[i:] that is not
// printable ASCII (0x20–0x7E), or len(s).
func printableEnd(s string, i int) int {
	// Whole 16-byte blocks first (printableBlocks: vector instructions on
	// amd64), then words and bytes.
	if n := len(s) - i; n >= 16 {
		blocks := n &^ 15
		if k := printableBlocks(unsafe.StringData(s[i:]), n); k < blocks {
			return i + k
		}
		i += blocks
	}
	return printableWords(s, i)
}

// printableWords is printableEnd 8 bytes a step: for a word x,
// (x − 0x20…20) &^ x flags bytes below 0x20, x + 0x01…01 sets the high
// bit of 0x7F bytes, and x itself flags bytes from 0x80.
func printableWords(s string, i int) int {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	// w shrinks from the front, so the compiler drops the loads' bounds
	// checks (with s[i+k] it kept eight a word).
	w := s[i:]
	for len(w) >= 8 {
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		low := (x - lsb*0x20) &^ x
		del := ((x &^ msb) + lsb) &^ x // high bit set iff the 7 low bits are all ones and the byte is < 0x80
		if m := (low | del | x) & msb; m != 0 {
			return len(s) - len(w) + bits.TrailingZeros64(m)/8
		}
		w = w[8:]
	}
	for len(w) > 0 && w[0] >= 0x20 && w[0] < 0x7F {
		w = w[1:]
	}
	return len(s) - len(w)
}

// wrapLine moves to the start of the next line after a pending wrap,
// scrolling if needed, and marks that line as a continuation.
func (e *emulator) wrapLine(scr *screen) {
	e.pending = false
	e.x = 0
	e.index()
	scr.wrapped[e.y] = true
}

func (e *emulator) printRune(r rune) {
	w := runeWidth(r)
	scr := e.cur()
	if w == 0 {
		e.combine(r)
		return
	}
	if e.pending {
		if e.autowrap {
			e.wrapLine(scr)
		} else {
			e.pending = false
		}
	}
	line := scr.line(e.y)
	if line[e.x].ch == tailRune && e.x > 0 {
		line[e.x-1] = cell{fg: e.fg, bg: e.bg}
	}
	if w == 2 && e.x == e.cols-1 {
		if !e.autowrap {
			// xterm.js drops a wide character that does not fit (and
			// clears a second half left alone in the last column).
			if line[e.x].ch == tailRune {
				line[e.x] = cell{fg: e.fg, bg: e.bg}
			}
			return
		}
		line[e.x] = cell{fg: e.fg, bg: e.bg}
		e.wrapLine(scr)
		line = scr.line(e.y)
	}
	if w == 2 && e.cols < 2 {
		return
	}
	if e.insert {
		e.insertCells(line, e.x, w, e.eraseCell())
	}
	if line[e.x].ch == tailRune && e.x > 0 {
		line[e.x-1] = cell{fg: e.fg, bg: e.bg}
	}
	if w == 2 {
		line[e.x] = cell{ch: r, fg: e.fg, bg: e.bg | aWide}
		line[e.x+1] = cell{ch: tailRune, fg: e.fg, bg: e.bg}
	} else {
		line[e.x] = cell{ch: r, fg: e.fg, bg: e.bg}
	}
	nx := e.x + w
	if nx >= e.cols {
		e.x = e.cols - 1
		e.pending = e.autowrap
	} else {
		e.x = nx
		if line[nx].ch == tailRune {
			line[nx] = cell{fg: e.fg, bg: e.bg}
		}
	}
	e.lastChar = r
}

// combine appends a zero-width code point to the preceding cell.
func (e *emulator) combine(r rune) {
	x := e.x - 1
	if e.pending {
		x = e.x
	}
	if x < 0 {
		return
	}
	line := e.cur().line(e.y)
	if line[x].ch == tailRune && x > 0 {
		x--
	}
	c := &line[x]
	if c.ch == 0 {
		return // nothing to combine with (xterm.js would keep the mark alone)
	}
	base := e.cellText(c.ch)
	if len(e.clusters) >= maxClusters {
		return
	}
	s := base + string(r)
	if e.clusterIdx == nil {
		e.clusterIdx = make(map[string]rune)
	}
	idx, ok := e.clusterIdx[s]
	if !ok {
		idx = clusterBase + rune(len(e.clusters))
		e.clusters = append(e.clusters, s)
		e.clusterIdx[s] = idx
	}
	c.ch = idx
}

// cellText returns the text of a cell's ch ("" for empty cells and wide tails).
func (e *emulator) cellText(ch rune) string {
	switch {
	case ch <= 0:
		return ""
	case ch >= clusterBase:
		return e.clusters[ch-clusterBase]
	}
	return string(ch)
}

func (e *emulator) insertCells(line []cell, x, n int, blank cell) {
	if n > e.cols-x {
		n = e.cols - x
	}
	if x > 0 && line[x].ch == tailRune {
		line[x-1] = blank
		line[x] = blank
	}
	copy(line[x+n:], line[x:e.cols-n])
	fill(line[x:x+n], blank)
	if line[e.cols-1].bg&aWide != 0 {
		line[e.cols-1] = blank
	}
	if x+n < e.cols && line[x+n].ch == tailRune {
		line[x+n] = blank
	}
}

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

// --- SGR ---

func (e *emulator) sgr() {
	if e.nparams == 0 {
		e.fg, e.bg = 0, 0
		return
	}
	for i := 0; i < e.nparams; i++ {
		p := e.params[i]
		if p < 0 {
			p = 0
		}
		switch {
		case p == 0:
			e.fg, e.bg = 0, 0
		case p == 1:
			e.fg |= aBold
		case p == 2:
			e.fg |= aDim
		case p == 3:
			e.fg |= aItalic
		case p == 4:
			style := uint32(1)
			if i+1 < e.nparams && e.sub[i+1] {
				i++
				style = uint32(max(0, e.params[i]))
				if style > 5 {
					style = 1
				}
			}
			e.bg = e.bg&^ulMask | style<<ulShift
		case p == 5 || p == 6:
			e.fg |= aBlink
		case p == 7:
			e.fg |= aInverse
		case p == 8:
			e.fg |= aHidden
		case p == 9:
			e.bg |= aStrike
		case p == 21:
			e.bg = e.bg&^ulMask | 2<<ulShift
		case p == 22:
			e.fg &^= aBold | aDim
		case p == 23:
			e.fg &^= aItalic
		case p == 24:
			e.bg &^= ulMask
		case p == 25:
			e.fg &^= aBlink
		case p == 27:
			e.fg &^= aInverse
		case p == 28:
			e.fg &^= aHidden
		case p == 29:
			e.bg &^= aStrike
		case p >= 30 && p <= 37:
			e.fg = e.fg&^(cmMask|colorMask) | cmIndexed | uint32(p-30)
		case p == 38, p == 48, p == 58:
			var c uint32
			var ok bool
			c, i, ok = e.extColor(i)
			if !ok || p == 58 {
				continue // underline colour is not modelled (doc.go)
			}
			if p == 38 {
				e.fg = e.fg&^(cmMask|colorMask) | c
			} else {
				e.bg = e.bg&^(cmMask|colorMask) | c
			}
		case p == 39:
			e.fg &^= cmMask | colorMask
		case p >= 40 && p <= 47:
			e.bg = e.bg&^(cmMask|colorMask) | cmIndexed | uint32(p-40)
		case p == 49:
			e.bg &^= cmMask | colorMask
		case p == 53:
			e.bg |= aOverline
		case p == 55:
			e.bg &^= aOverline
		case p >= 90 && p <= 97:
			e.fg = e.fg&^(cmMask|colorMask) | cmIndexed | uint32(p-90+8)
		case p >= 100 && p <= 107:
			e.bg = e.bg&^(cmMask|colorMask) | cmIndexed | uint32(p-100+8)
		}
	}
}

// extColor parses the colour after 38/48/58 at params[i], in the ';' form
// (38;5;n, 38;2;r;g;b) or the ':' form (38:5:n, 38:2:r:g:b, 38:2:cs:r:g:b).
// It returns the packed colour, the index of the last parameter consumed,
// and whether a colour was found.
func (e *emulator) extColor(i int) (uint32, int, bool) {
	if i+1 >= e.nparams {
		return 0, i, false
	}
	colon := e.sub[i+1]
	var vals [6]int32
	n := 0
	j := i + 1
	for ; j < e.nparams && n < len(vals); j++ {
		if colon && !e.sub[j] {
			break
		}
		vals[n] = e.params[j]
		n++
		if !colon {
			if vals[0] == 5 && n == 2 || vals[0] == 2 && n == 4 || vals[0] != 2 && vals[0] != 5 {
				j++
				break
			}
		}
	}
	last := j - 1
	switch vals[0] {
	case 5:
		if n < 2 || vals[1] < 0 || vals[1] > 255 {
			return 0, last, false
		}
		return cmIndexed | uint32(vals[1]), last, true
	case 2:
		var r, g, b int32
		switch {
		case n >= 5 && colon:
			r, g, b = vals[2], vals[3], vals[4]
		case n >= 4:
			r, g, b = vals[1], vals[2], vals[3]
		default:
			return 0, last, false
		}
		r, g, b = max(r, 0), max(g, 0), max(b, 0)
		return cmRGB | uint32(min(r, 255))<<16 | uint32(min(g, 255))<<8 | uint32(min(b, 255)), last, true
	}
	return 0, last, false
}

// --- OSC ---

func (e *emulator) oscDispatch() {
	if e.oscLong {
		return
	}
	s := string(e.osc)
	num, rest := 0, ""
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		num = num*10 + int(s[i]-'0')
		i++
		if num > 10000 {
			return
		}
	}
	if i == 0 {
		return
	}
	if i < len(s) {
		if s[i] != ';' {
			return
		}
		rest = s[i+1:]
	}
	switch num {
	case 0, 2:
		e.title = rest
	case 4:
		parts := splitSemi(rest)
		for k := 0; k+1 < len(parts); k += 2 {
			idx, ok := atoi(parts[k])
			if !ok || idx > 255 || parts[k+1] == "?" {
				continue
			}
			if e.palette == nil {
				e.palette = make(map[int]string)
			}
			e.palette[idx] = parts[k+1]
		}
	case 104:
		if rest == "" {
			e.palette = nil
			break
		}
		for _, p := range splitSemi(rest) {
			if idx, ok := atoi(p); ok {
				delete(e.palette, idx)
			}
		}
	case 10, 11, 12:
		for k, p := range splitSemi(rest) {
			if num-10+k > 2 {
				break
			}
			if p != "?" {
				e.dynamic[num-10+k] = p
			}
		}
	case 110, 111, 112:
		e.dynamic[num-110] = ""
	}
}

func splitSemi(s string) []string {
	var out []string
	for {
		i := 0
		for i < len(s) && s[i] != ';' {
			i++
		}
		out = append(out, s[:i])
		if i == len(s) {
			return out
		}
		s = s[i+1:]
	}
}

func atoi(s string) (int, bool) {
	if s == "" || len(s) > 6 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// --- resize ---

// resize changes the size of both screens. Lines are truncated or padded
// (no reflow); when rows shrink, lines leave the top of the normal screen
// into the scrollback as far as needed to keep the cursor row visible.
func (e *emulator) resize(rows, cols int) {
	if rows == e.rows && cols == e.cols {
		return
	}
	for k := range e.scr {
		s := &e.scr[k]
		// Columns.
		for _, r := range s.lines {
			l := r.line()
			if cols <= cap(l) {
				old := len(l)
				l = l[:cols]
				for x := old; x < cols; x++ {
					l[x] = cell{}
				}
			} else {
				nl := make([]cell, cols)
				copy(nl, l)
				l = nl
			}
			if cols < len(r.cells) && l[cols-1].bg&aWide != 0 {
				l[cols-1] = cell{}
			}
			r.cells = l
		}
		// Rows.
		if rows < e.rows {
			drop := 0
			if k == 0 && !e.alt || k == 1 && e.alt {
				drop = max(0, e.y-(rows-1))
			}
			for i := 0; i < drop; i++ {
				if k == 0 {
					e.sb.push(s.lines[i], s.wrapped[i])
				}
			}
			s.lines = append([]*row(nil), s.lines[drop:drop+rows]...)
			s.wrapped = append([]bool(nil), s.wrapped[drop:drop+rows]...)
		} else {
			for y := e.rows; y < rows; y++ {
				s.lines = append(s.lines, &row{cells: make([]cell, cols), plain: !e.cellsOnly})
				s.wrapped = append(s.wrapped, false)
			}
		}
		s.top, s.bot = 0, rows-1
		s.saved.x = min(s.saved.x, cols-1)
		s.saved.y = min(s.saved.y, rows-1)
	}
	if rows < e.rows {
		e.y = max(0, e.y-max(0, e.y-(rows-1)))
	}
	e.rows, e.cols = rows, cols
	e.x = min(e.x, cols-1)
	e.y = min(e.y, rows-1)
	e.pending = false
	oldTabs := e.tabs
	e.resetTabs()
	copy(e.tabs, oldTabs)
}
