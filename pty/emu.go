package pty

import "unicode/utf8"

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
	// maxClusterBytes bounds one cluster's text: a base and its marks
	// (32 of the two-byte marks most scripts use; Unicode's stream-safe
	// form allows 30 non-starters in a row). A mark beyond it is dropped,
	// as a mark past maxClusters is: without the bound each further mark
	// on a cell made a cluster holding all the marks before it, so that
	// 6 KB of output held 9 MB of clusters.
	maxClusterBytes = 64
	maxOSC          = 4096 // bound on a collected OSC payload, in bytes
	maxParams       = 32
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
	// REP repeats the character printed last, until a control, an escape
	// or control sequence (REP included, once it ran), an OSC or a DCS
	// ends; the bytes that build a sequence do not count (xterm.js resets
	// it on the same actions).
	switch act {
	case acExecute, acEscDispatch, acCsiDispatch, acOscEnd, acOscAbort, acUnhook, acDcsAbort:
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
