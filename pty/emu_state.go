// The emulator's state as bytes: what a new binary needs to carry on a
// terminal after an in-place upgrade (issue 38). See doc.go, "State codec".

package pty

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
	"unsafe"
)

// emuStateVersion is the version of the state format. Any change to the
// format bumps it; decodeEmulatorState refuses a version it does not know.
const emuStateVersion = 1

const (
	// maxOSCBytes is the longest OSC payload the emulator collects: a rune
	// appended while it holds maxOSC-1 bytes (transition, acOscPut). The
	// title and the colour strings come from such a payload.
	maxOSCBytes = maxOSC + utf8.UTFMax - 1
	// maxParamValue is the largest value param accumulates (it stops
	// multiplying at 100000).
	maxParamValue = 999999
)

// Flag bits of the state's flags word.
const (
	sfAlt = 1 << iota
	sfCellsOnly
	sfPending
	sfCursorKeys
	sfKeypad
	sfOrigin
	sfAutowrap
	sfCursorBlink
	sfCursorHidden
	sfInsert
	sfLNM
	sfFocus
	sfBracketedPaste
	sfInParam
	sfOscLong
	sfAll = 1<<iota - 1
)

// Line header bits.
const (
	lineWrapped = 1 << iota
	linePlain
	lineAll = 1<<iota - 1
)

// appendState appends e's complete state to b, in this order (u: uvarint,
// s: varint, str: u length then bytes, line: see appendLine):
//
//	u version (1)
//	u rows, u cols, u flags (sf*), u x, u y, u fg, u bg
//	u mouse, u mouseEnc, u cursorStyle, str title
//	4 bytes charsets, u gl, ceil(cols/8) bytes tab stops (bit x%8 of byte x/8)
//	u palette entries, each u index (ascending) and str; 3 × str dynamic colours
//	u lastChar, u clusters, each str
//	parser: 1 byte state, u nparams, 32 × s params, u sub bits, 1 byte each
//	prefix, inter and dcsFinal, str osc
//	2 × screen: u top, u bot, saved cursor (u x, u y, u fg, u bg, 4 bytes
//	charsets, u gl), rows × line
//	scrollback: u max, u lines, each line (oldest first)
//
// It does not change e (plain rows stay plain).
func (e *emulator) appendState(b []byte) []byte {
	flags := 0
	for _, f := range [...]struct {
		bit int
		on  bool
	}{
		{sfAlt, e.alt}, {sfCellsOnly, e.cellsOnly}, {sfPending, e.pending},
		{sfCursorKeys, e.cursorKeys}, {sfKeypad, e.keypad}, {sfOrigin, e.origin},
		{sfAutowrap, e.autowrap}, {sfCursorBlink, e.cursorBlink},
		{sfCursorHidden, e.cursorHidden}, {sfInsert, e.insert}, {sfLNM, e.lnm},
		{sfFocus, e.focus}, {sfBracketedPaste, e.bracketedPaste},
		{sfInParam, e.inParam}, {sfOscLong, e.oscLong},
	} {
		if f.on {
			flags |= f.bit
		}
	}
	u := func(v int) { b = binary.AppendUvarint(b, uint64(v)) }
	str := func(s string) { u(len(s)); b = append(b, s...) }
	u(emuStateVersion)
	u(e.rows)
	u(e.cols)
	u(flags)
	u(e.x)
	u(e.y)
	u(int(e.fg))
	u(int(e.bg))
	u(e.mouse)
	u(e.mouseEnc)
	u(e.cursorStyle)
	str(e.title)
	b = append(b, e.charsets[:]...)
	u(e.gl)
	tabs := make([]byte, (e.cols+7)/8)
	for x, t := range e.tabs {
		if t {
			tabs[x/8] |= 1 << (x % 8)
		}
	}
	b = append(b, tabs...)
	n := 0
	for i := 0; i < 256; i++ {
		if _, ok := e.palette[i]; ok {
			n++
		}
	}
	u(n)
	for i := 0; i < 256; i++ {
		if s, ok := e.palette[i]; ok {
			u(i)
			str(s)
		}
	}
	for _, s := range e.dynamic {
		str(s)
	}
	u(int(e.lastChar))
	u(len(e.clusters))
	for _, s := range e.clusters {
		str(s)
	}
	// Parser.
	b = append(b, e.st)
	u(e.nparams)
	var sub uint64
	for i, p := range e.params {
		b = binary.AppendVarint(b, int64(p))
		if e.sub[i] {
			sub |= 1 << i
		}
	}
	b = binary.AppendUvarint(b, sub)
	b = append(b, e.prefix, e.inter, e.dcsFinal)
	str(string(e.osc))
	// Screens.
	for k := range e.scr {
		s := &e.scr[k]
		u(s.top)
		u(s.bot)
		sc := &s.saved
		u(sc.x)
		u(sc.y)
		u(int(sc.fg))
		u(int(sc.bg))
		b = append(b, sc.charsets[:]...)
		u(sc.gl)
		for y, r := range s.lines {
			// A plain row's cells are out of date (row.line rewrites
			// them before anything reads them): only its text is state.
			if r.plain {
				b = appendLine(b, s.wrapped[y], r.text, nil, true)
			} else {
				b = appendLine(b, s.wrapped[y], nil, r.cells, false)
			}
		}
	}
	// Scrollback, oldest line first (the ring's rotation is not state).
	u(max(0, e.sb.max))
	u(e.sb.len())
	for i := 0; i < e.sb.len(); i++ {
		l := e.sb.at(i)
		// A line's other representation is out of date (sbLine.set).
		if l.isPlain {
			b = appendLine(b, l.wrapped, l.plain, nil, true)
		} else {
			b = appendLine(b, l.wrapped, nil, l.cells, false)
		}
	}
	return b
}

// stateSize returns about how many bytes appendState appends (at least
// that for a state of plain lines), so that the buffer is allocated once
// instead of growing through a megabyte of copies for a full scrollback.
func (e *emulator) stateSize() int {
	n := 1024 + len(e.title) + len(e.osc) + e.cols/8 + len(e.palette)*(maxOSCBytes/8)
	for _, s := range e.clusters {
		n += len(s) + 2
	}
	for _, s := range e.dynamic {
		n += len(s) + 2
	}
	line := func(plain bool, text int, cells int) int {
		if plain {
			return text + 4
		}
		return 2*cells + 8 // a character is 1 byte, a run of one pen ~6
	}
	for k := range e.scr {
		for _, r := range e.scr[k].lines {
			n += line(r.plain, len(r.text), len(r.cells))
		}
	}
	for i := 0; i < e.sb.len(); i++ {
		l := e.sb.at(i)
		n += line(l.isPlain, len(l.plain), len(l.cells))
	}
	return n
}

// appendLine appends a line: u header (lineWrapped, linePlain), then a
// plain line's text as str, or cells as u count followed by runs of cells
// with one pen: u length, u fg, u bg (without aWide), and per cell u ch+2
// (0 tail, 1 erased), preceded by a 0 byte when the cell has aWide.
func appendLine(b []byte, wrapped bool, text []byte, cells []cell, plain bool) []byte {
	h := uint64(0)
	if wrapped {
		h |= lineWrapped
	}
	if plain {
		h |= linePlain
		b = binary.AppendUvarint(b, h)
		b = binary.AppendUvarint(b, uint64(len(text)))
		return append(b, text...)
	}
	b = binary.AppendUvarint(b, h)
	b = binary.AppendUvarint(b, uint64(len(cells)))
	for i := 0; i < len(cells); {
		fg, bg := cells[i].fg, cells[i].bg&^aWide
		j := i + 1
		for j < len(cells) && cells[j].fg == fg && cells[j].bg&^aWide == bg {
			j++
		}
		b = binary.AppendUvarint(b, uint64(j-i))
		b = binary.AppendUvarint(b, uint64(fg))
		b = binary.AppendUvarint(b, uint64(bg))
		for _, c := range cells[i:j] {
			if c.bg&aWide != 0 {
				b = append(b, 0)
			}
			if v := uint64(int64(c.ch) + 2); v < 0x80 {
				b = append(b, byte(v))
			} else {
				b = binary.AppendUvarint(b, v)
			}
		}
		i = j
	}
	return b
}

// stateReader reads a state; the first error sticks and every later read
// returns zero values.
type stateReader struct {
	b   []byte
	err error
	// The scrollback's lines are cut from slabs, a few allocations
	// instead of one per line; each line gets its own cap, so a line
	// that grows later (sbLine.set) moves out instead of overwriting its
	// neighbour.
	cellSlab []cell
	textSlab []byte
	// check: the state is only checked (checkEmulatorState): the
	// scrollback's lines are read and checked as they would be kept, one
	// after the other into scratch, and nothing of them is kept.
	check   bool
	scratch []cell
}

const slabSize = 16 << 10

func (r *stateReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.b = nil
}

func (r *stateReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		r.fail("%s: truncated", what)
		return 0
	case n < 0:
		r.fail("%s: varint longer than 64 bits", what)
		return 0
	case n > 1 && r.b[n-1] == 0:
		// Not the shortest form: the encoder never writes it, and a
		// decoded state re-encodes to the same bytes.
		r.fail("%s: varint not in its shortest form", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// num reads a uvarint of at most max.
func (r *stateReader) num(what string, max int) int {
	v := r.uvarint(what)
	if v > uint64(max) {
		r.fail("%s: %d, more than %d", what, v, max)
		return 0
	}
	return int(v)
}

func (r *stateReader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("%s: truncated", what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// bytesN returns the next n bytes (not copied).
func (r *stateReader) bytesN(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail("%s: truncated (%d bytes, %d left)", what, n, len(r.b))
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

// text reads a string of at most max bytes of valid UTF-8 holding only
// characters an OSC payload can hold (no C0, DEL or C1 control), and
// without ';' when noSemi.
func (r *stateReader) text(what string, max int, noSemi bool) string {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return ""
	}
	if n > uint64(max) {
		r.fail("%s: %d bytes, more than the %d the emulator keeps", what, n, max)
		return ""
	}
	b := r.bytesN(what, int(n))
	if r.err != nil {
		return ""
	}
	if err := checkText(b, noSemi); err != "" {
		r.fail("%s: %s", what, err)
		return ""
	}
	return string(b)
}

// checkText describes what is wrong with b as OSC text, or returns "".
func checkText(b []byte, noSemi bool) string {
	for i := 0; i < len(b); {
		c, n := utf8.DecodeRune(b[i:])
		switch {
		case c == utf8.RuneError && n <= 1:
			return fmt.Sprintf("invalid UTF-8 at byte %d", i)
		case !printable(c):
			return fmt.Sprintf("control character %U at byte %d", c, i)
		case c == ';' && noSemi:
			return fmt.Sprintf("';' at byte %d", i)
		}
		i += n
	}
	return ""
}

// printable reports whether r is a character the emulator can print or
// collect: a valid code point that is not a C0, DEL or C1 control. (Widths
// are not checked: a newer binary's width tables may differ.)
func printable(r rune) bool {
	return r >= 0x20 && !(r >= 0x7F && r < 0xA0) && utf8.ValidRune(r)
}

// checkColor, checkFg and checkBg describe what is wrong with a packed
// colour and attribute word, or return "": a colour mode of 3, a default
// colour with a value, an indexed colour beyond 255, an underline style
// beyond 5, and (in a pen, or a run of cells, which carries it per cell)
// the aWide bit, none of which SGR can produce.
func checkColor(v uint32) string {
	switch v & cmMask {
	case cmMask:
		return fmt.Sprintf("%#08x: colour mode 3", v)
	case 0:
		if v&colorMask != 0 {
			return fmt.Sprintf("%#08x: default colour with a value", v)
		}
	case cmIndexed:
		if v&colorMask > 255 {
			return fmt.Sprintf("%#08x: colour index beyond 255", v)
		}
	}
	return ""
}

func checkFg(v uint32) string { return checkColor(v) }

func checkBg(v uint32) string {
	if s := checkColor(v); s != "" {
		return s
	}
	if ul := (v & ulMask) >> ulShift; ul > 5 {
		return fmt.Sprintf("%#08x: underline style %d", v, ul)
	}
	if v&aWide != 0 {
		return fmt.Sprintf("%#08x: wide bit outside a cell", v)
	}
	return ""
}

func (r *stateReader) pen(what string) (fg, bg uint32) {
	f := r.uvarint(what + " fg")
	g := r.uvarint(what + " bg")
	if s := checkPen(f, g); r.err == nil && s != "" {
		r.fail("%s: %s", what, s)
	}
	if r.err != nil {
		return 0, 0
	}
	return uint32(f), uint32(g)
}

// checkPen describes what is wrong with a pen's fg and bg, or returns "".
func checkPen(f, g uint64) string {
	if f > 0xFFFFFFFF || g > 0xFFFFFFFF {
		return fmt.Sprintf("attributes %#x/%#x beyond 32 bits", f, g)
	}
	if s := checkFg(uint32(f)); s != "" {
		return "fg " + s
	}
	if s := checkBg(uint32(g)); s != "" {
		return "bg " + s
	}
	return ""
}

func (r *stateReader) charsets(what string) (cs [4]byte) {
	b := r.bytesN(what, 4)
	if r.err != nil {
		return cs
	}
	for i, c := range b {
		if c != 0 && (c < 0x30 || c > 0x7E) {
			r.fail("%s: G%d = %#x, not a charset final byte", what, i, c)
			return cs
		}
		cs[i] = c
	}
	return cs
}

// decodeEmulatorState decodes a state written by appendState into a new
// emulator whose buffers are its own, and returns the bytes after it. The
// scrollback it keeps may be at most maxScrollback lines. Every length and
// count is checked against its bound before anything is allocated for it;
// an input that is truncated, exceeds a bound or is inconsistent is
// refused with an error that names what is wrong.
func decodeEmulatorState(b []byte, maxScrollback int) (*emulator, []byte, error) {
	r := &stateReader{b: b}
	e, err := r.emulator(max(0, maxScrollback))
	if err != nil {
		return nil, nil, fmt.Errorf("emulator state: %w", err)
	}
	return e, r.b, nil
}

// checkEmulatorState checks a state as decodeEmulatorState reads it —
// the same reads, bounds and checks, the same error — without keeping the
// scrollback's lines (ahpd --upgrade-check reads a hundred full
// scrollbacks; Adopt decodes them again). The emulator it returns has
// no scrollback: it is good for its size and modes only.
func checkEmulatorState(b []byte, maxScrollback int) (*emulator, []byte, error) {
	r := &stateReader{b: b, check: true}
	e, err := r.emulator(max(0, maxScrollback))
	if err != nil {
		return nil, nil, fmt.Errorf("emulator state: %w", err)
	}
	return e, r.b, nil
}

func (r *stateReader) emulator(maxScrollback int) (*emulator, error) {
	if v := r.uvarint("version"); r.err == nil && v != emuStateVersion {
		return nil, fmt.Errorf("version %d, this binary knows only %d", v, emuStateVersion)
	}
	e := &emulator{}
	e.rows = r.num("rows", MaxSize)
	e.cols = r.num("columns", MaxSize)
	if r.err == nil && (e.rows == 0 || e.cols == 0) {
		r.fail("size %dx%d, want at least 1x1", e.rows, e.cols)
	}
	flags := r.uvarint("flags")
	if flags&^sfAll != 0 {
		r.fail("flags %#x: unknown bits %#x", flags, flags&^sfAll)
	}
	on := func(bit uint64) bool { return flags&bit != 0 }
	e.alt, e.cellsOnly, e.pending = on(sfAlt), on(sfCellsOnly), on(sfPending)
	e.cursorKeys, e.keypad, e.origin = on(sfCursorKeys), on(sfKeypad), on(sfOrigin)
	e.autowrap, e.cursorBlink, e.cursorHidden = on(sfAutowrap), on(sfCursorBlink), on(sfCursorHidden)
	e.insert, e.lnm, e.focus = on(sfInsert), on(sfLNM), on(sfFocus)
	e.bracketedPaste, e.inParam, e.oscLong = on(sfBracketedPaste), on(sfInParam), on(sfOscLong)
	e.x = r.num("cursor column", max(0, e.cols-1))
	e.y = r.num("cursor row", max(0, e.rows-1))
	e.fg, e.bg = r.pen("pen")
	e.mouse = r.num("mouse mode", 1003)
	switch e.mouse {
	case 0, 9, 1000, 1002, 1003:
	default:
		r.fail("mouse mode %d, not one of 0, 9, 1000, 1002, 1003", e.mouse)
	}
	e.mouseEnc = r.num("mouse encoding", 1016)
	switch e.mouseEnc {
	case 0, 1005, 1006, 1015, 1016:
	default:
		r.fail("mouse encoding %d, not one of 0, 1005, 1006, 1015, 1016", e.mouseEnc)
	}
	e.cursorStyle = r.num("cursor style", maxParamValue)
	e.title = r.text("title", maxOSCBytes, false)
	e.charsets = r.charsets("charsets")
	e.gl = r.num("GL", 3)
	if tb := r.bytesN("tab stops", (e.cols+7)/8); r.err == nil {
		e.tabs = make([]bool, e.cols)
		for x := range e.tabs {
			e.tabs[x] = tb[x/8]&(1<<(x%8)) != 0
		}
		if e.cols%8 != 0 && tb[len(tb)-1]>>(e.cols%8) != 0 {
			r.fail("tab stops beyond the %d columns", e.cols)
		}
	}
	if n := r.num("palette entries", 256); n > 0 {
		e.palette = make(map[int]string, n)
		prev := -1
		for k := 0; k < n && r.err == nil; k++ {
			i := r.num("palette index", 255)
			if r.err == nil && i <= prev {
				r.fail("palette index %d after %d, want ascending", i, prev)
			}
			e.palette[i] = r.text(fmt.Sprintf("palette colour %d", i), maxOSCBytes, true)
			prev = i
		}
	}
	for i := range e.dynamic {
		e.dynamic[i] = r.text(fmt.Sprintf("dynamic colour %d", 10+i), maxOSCBytes, true)
	}
	if c := rune(r.num("last character", utf8.MaxRune)); c != 0 && !printable(c) {
		r.fail("last character %U: not printable", c)
	} else {
		e.lastChar = c
	}
	r.clusters(e)
	r.parser(e)
	if r.err != nil {
		return nil, r.err
	}
	for k := range e.scr {
		r.screen(e, k)
	}
	r.scrollback(e, maxScrollback)
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}

func (r *stateReader) clusters(e *emulator) {
	n := r.num("clusters", maxClusters)
	if r.err != nil || n == 0 {
		return
	}
	if n > len(r.b) {
		r.fail("clusters: %d, more than the %d bytes left", n, len(r.b))
		return
	}
	e.clusters = make([]string, 0, n)
	// clusterIdx is a cache of clusters: rebuilt, not carried.
	e.clusterIdx = make(map[string]rune, n)
	for i := 0; i < n && r.err == nil; i++ {
		what := "cluster"
		l := r.uvarint(what)
		if r.err != nil {
			return
		}
		if l == 0 || l > maxClusterBytes {
			r.fail("cluster %d: %d bytes, want 1..%d", i, l, maxClusterBytes)
			return
		}
		b := r.bytesN(what, int(l))
		if r.err != nil {
			return
		}
		if s := checkText(b, false); s != "" {
			r.fail("cluster %d: %s", i, s)
			return
		}
		s := string(b)
		if _, dup := e.clusterIdx[s]; dup {
			r.fail("cluster %d: %q repeats an earlier one", i, s)
			return
		}
		e.clusterIdx[s] = clusterBase + rune(i)
		e.clusters = append(e.clusters, s)
	}
}

func (r *stateReader) parser(e *emulator) {
	st := r.byte1("parser state")
	if r.err == nil && st >= numStates {
		r.fail("parser state %d, want 0..%d", st, numStates-1)
	}
	e.st = st
	e.nparams = r.num("parameters", maxParams)
	for i := range e.params {
		if r.err != nil {
			return
		}
		v, n := binary.Varint(r.b)
		switch {
		case n == 0:
			r.fail("parameter %d: truncated", i)
		case n < 0:
			r.fail("parameter %d: varint longer than 64 bits", i)
		case n > 1 && r.b[n-1] == 0:
			r.fail("parameter %d: varint not in its shortest form", i)
		case v < -1 || v > maxParamValue:
			r.fail("parameter %d: %d, want -1..%d", i, v, maxParamValue)
		default:
			e.params[i] = int32(v)
			r.b = r.b[n:]
		}
	}
	sub := r.uvarint("sub-parameter bits")
	if sub>>maxParams != 0 {
		r.fail("sub-parameter bits %#x beyond the %d parameters", sub, maxParams)
	}
	for i := range e.sub {
		e.sub[i] = sub&(1<<i) != 0
	}
	e.prefix = r.byte1("private marker")
	if p := e.prefix; p != 0 && (p < 0x3C || p > 0x3F) {
		r.fail("private marker %#x, want 0 or 0x3c..0x3f", p)
	}
	e.inter = r.byte1("intermediate")
	if c := e.inter; c != 0 && (c < 0x20 || c > 0x2F) {
		r.fail("intermediate %#x, want 0 or 0x20..0x2f", c)
	}
	e.dcsFinal = r.byte1("DCS final")
	if c := e.dcsFinal; c != 0 && (c < 0x40 || c > 0x7E) {
		r.fail("DCS final %#x, want 0 or 0x40..0x7e", c)
	}
	if osc := r.text("OSC payload", maxOSCBytes, false); osc != "" {
		e.osc = []byte(osc)
	}
}

func (r *stateReader) screen(e *emulator, k int) {
	name := [2]string{"normal screen", "alternate screen"}[k]
	s := &e.scr[k]
	s.top = r.num(name+" scroll region top", e.rows-1)
	s.bot = r.num(name+" scroll region bottom", e.rows-1)
	if r.err == nil && s.top > s.bot {
		r.fail("%s: scroll region %d-%d, top below bottom", name, s.top, s.bot)
	}
	sc := &s.saved
	sc.x = r.num(name+" saved cursor column", e.cols-1)
	sc.y = r.num(name+" saved cursor row", e.rows-1)
	sc.fg, sc.bg = r.pen(name + " saved pen")
	sc.charsets = r.charsets(name + " saved charsets")
	sc.gl = r.num(name+" saved GL", 3)
	if r.err != nil {
		return
	}
	// Every row takes at least two bytes: check before allocating them.
	if 2*e.rows > len(r.b) {
		r.fail("%s: %d rows, %d bytes left", name, e.rows, len(r.b))
		return
	}
	s.lines = make([]*row, e.rows)
	s.wrapped = make([]bool, e.rows)
	// base and wbase, the arrays the rows slide over, are spare room:
	// slide makes them when it first needs them.
	rs := make([]row, e.rows)
	backing := make([]cell, e.rows*e.cols)
	for y := range s.lines {
		rw := &rs[y]
		rw.cells = backing[y*e.cols : (y+1)*e.cols : (y+1)*e.cols]
		s.lines[y] = rw
		wrapped, text, plain, _ := r.line(rw.cells, len(e.clusters), func() string { return fmt.Sprintf("%s row %d", name, y) })
		if r.err != nil {
			return
		}
		s.wrapped[y] = wrapped
		if plain {
			if e.cellsOnly {
				r.fail("%s row %d: plain, but the emulator keeps cells only", name, y)
				return
			}
			rw.plain = true
			if len(text) > 0 {
				rw.text = make([]byte, len(text), e.cols)
				copy(rw.text, text)
			}
		}
	}
}

func (r *stateReader) scrollback(e *emulator, limit int) {
	m := r.uvarint("scrollback size")
	if r.err != nil {
		return
	}
	if m > uint64(limit) {
		r.fail("scrollback of %d lines, more than the limit of %d", m, limit)
		return
	}
	e.sb.max = int(m)
	n := r.num("scrollback lines", e.sb.max)
	if r.err != nil || n == 0 {
		return
	}
	// Every line takes at least two bytes.
	if 2*n > len(r.b) {
		r.fail("scrollback: %d lines, %d bytes left", n, len(r.b))
		return
	}
	if r.check {
		for i := 0; i < n; i++ {
			r.line(nil, len(e.clusters), func() string { return fmt.Sprintf("scrollback line %d", i) })
			if r.err != nil {
				return
			}
		}
		return
	}
	e.sb.lines = make([]sbLine, n)
	for i := range e.sb.lines {
		l := &e.sb.lines[i]
		var text []byte
		l.wrapped, text, l.isPlain, l.cells = r.line(nil, len(e.clusters), func() string { return fmt.Sprintf("scrollback line %d", i) })
		if r.err != nil {
			return
		}
		if l.isPlain && len(text) > 0 {
			k := len(r.textSlab)
			if cap(r.textSlab)-k < len(text) {
				r.textSlab, k = make([]byte, 0, len(text)+min(slabSize, len(r.b))), 0
			}
			r.textSlab = append(r.textSlab, text...)
			l.plain = r.textSlab[k : k+len(text) : k+len(text)]
		}
	}
}

// line reads a line (appendLine). A screen row's cells (exactly len(dst))
// are decoded into dst; a scrollback line's (at most MaxSize) into a new
// slice. A plain line's text is returned without copying; it must hold at
// most len(dst) (or MaxSize) bytes of printable ASCII.
func (r *stateReader) line(dst []cell, nclusters int, what func() string) (wrapped bool, text []byte, plain bool, cells []cell) {
	h := r.uvarint("line header")
	if r.err != nil {
		r.err = fmt.Errorf("%s: %w", what(), r.err)
		return
	}
	if h&^lineAll != 0 {
		r.fail("%s: header %#x: unknown bits", what(), h)
		return
	}
	wrapped, plain = h&lineWrapped != 0, h&linePlain != 0
	width, unit := MaxSize, "columns"
	if dst != nil {
		width, unit = len(dst), "screen's columns"
	}
	n := r.uvarint("line length")
	if r.err != nil {
		r.err = fmt.Errorf("%s: %w", what(), r.err)
		return
	}
	if plain {
		if n > uint64(width) {
			r.fail("%s: %d characters, more than the %d %s", what(), n, width, unit)
			return
		}
		text = r.bytesN("text", int(n))
		if r.err != nil {
			r.err = fmt.Errorf("%s: %w", what(), r.err)
			return
		}
		if len(text) > 0 {
			if i := printableEnd(unsafe.String(&text[0], len(text)), 0); i < len(text) {
				r.fail("%s: byte %#x at %d in a plain line", what(), text[i], i)
			}
		}
		return
	}
	switch {
	case dst != nil && n != uint64(width):
		r.fail("%s: %d cells, want the %d columns", what(), n, width)
		return
	case n > uint64(width):
		r.fail("%s: %d cells, more than the %d columns", what(), n, width)
		return
	case n > uint64(len(r.b)):
		r.fail("%s: %d cells, %d bytes left", what(), n, len(r.b))
		return
	}
	cells = dst
	if cells == nil && n > 0 && r.check {
		if cap(r.scratch) < int(n) {
			r.scratch = make([]cell, n)
		}
		cells = r.scratch[:n]
	} else if cells == nil && n > 0 {
		k := len(r.cellSlab)
		if cap(r.cellSlab)-k < int(n) {
			// No more cells are left to decode than bytes.
			r.cellSlab, k = make([]cell, 0, max(int(n), min(slabSize, len(r.b)))), 0
		}
		r.cellSlab = r.cellSlab[:k+int(n)]
		cells = r.cellSlab[k : k+int(n) : k+int(n)]
	}
	var b []byte
	for x := 0; x < int(n); {
		rk := r.uvarint("run length")
		f := r.uvarint("run fg")
		g := r.uvarint("run bg")
		if r.err != nil {
			r.err = fmt.Errorf("%s: %w", what(), r.err)
			return
		}
		if rk == 0 || rk > uint64(int(n)-x) {
			r.fail("%s: run of %d cells at column %d, want 1..%d", what(), rk, x, int(n)-x)
			return
		}
		k := int(rk)
		if s := checkPen(f, g); s != "" {
			r.fail("%s: column %d: %s", what(), x, s)
			return
		}
		fg, bg := uint32(f), uint32(g)
		b = r.b
		for i := x; i < x+k; i++ {
			if len(b) > 0 && b[0] >= 0x22 && b[0] < 0x80 {
				// Printable ASCII (0x20..0x7E + 2), the common case.
				cells[i] = cell{ch: rune(b[0]) - 2, fg: fg, bg: bg}
				b = b[1:]
				continue
			}
			wide := uint32(0)
			if len(b) > 0 && b[0] == 0 {
				wide = aWide
				b = b[1:]
			}
			var v uint64
			if len(b) > 0 && b[0] < 0x80 {
				v = uint64(b[0])
				b = b[1:]
			} else {
				var m int
				v, m = binary.Uvarint(b)
				if m <= 0 || m > 1 && b[m-1] == 0 {
					r.b = b
					r.fail("%s: column %d: truncated or invalid character", what(), i)
					return
				}
				b = b[m:]
			}
			if v == 0 {
				r.b = b
				r.fail("%s: column %d: wide mark twice", what(), i)
				return
			}
			ch := rune(int64(v) - 2)
			if v > uint64(clusterBase)+maxClusters+2 || !(ch == 0 || ch == tailRune || printable(ch) || ch >= clusterBase && int(ch-clusterBase) < nclusters) {
				r.b = b
				r.fail("%s: column %d: character code %d, not a character, an erased cell, a wide character's second half or one of the %d clusters", what(), i, v, nclusters)
				return
			}
			cells[i] = cell{ch: ch, fg: fg, bg: bg | wide}
		}
		r.b = b
		x += k
	}
	return
}
