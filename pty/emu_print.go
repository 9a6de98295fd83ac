// Printing: charset mapping, the ASCII fast path, runes, wide characters and combining clusters.

package pty

import (
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

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
	if len(e.clusters) >= maxClusters || len(base)+utf8.RuneLen(r) > maxClusterBytes {
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
