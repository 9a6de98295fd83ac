package pty

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// Plain rows (row.plain) are an encoding of cells, not a second model: an
// emulator that keeps them must reach the same state, cell for cell and
// snapshot for snapshot, as one that keeps cells only (cellsOnly), on any
// input.

// plainTwins returns an emulator with plain rows and its cells-only twin.
func plainTwins(rows, cols, sb int) (plain, cells *emulator) {
	return newEmulator(rows, cols, sb), newEmulatorRows(rows, cols, sb, true)
}

// twinDiff lists how the twins differ: everything Diff compares, and what
// a snapshot does not carry but the next byte of output depends on (which
// lines continue the one before, what REP repeats, the parser's state). It
// also holds the reference to its word: the cells twin has no plain row.
func twinDiff(plain, cells *emulator) []string {
	d := Diff(&Emulator{plain}, &Emulator{cells})
	for k := range plain.scr {
		if a, b := plain.scr[k].wrapped, cells.scr[k].wrapped; fmt.Sprint(a) != fmt.Sprint(b) {
			d = append(d, fmt.Sprintf("screen %d wrapped %v vs %v", k, a, b))
		}
		for y, r := range cells.scr[k].lines {
			if r.plain {
				d = append(d, fmt.Sprintf("screen %d row %d of the cells twin is plain", k, y))
			}
		}
	}
	if plain.sb.len() == cells.sb.len() {
		for i := 0; i < plain.sb.len(); i++ {
			if a, b := plain.sb.at(i).wrapped, cells.sb.at(i).wrapped; a != b {
				d = append(d, fmt.Sprintf("scrollback %d wrapped %v vs %v", i, a, b))
			}
		}
	}
	if plain.lastChar != cells.lastChar {
		d = append(d, fmt.Sprintf("lastChar %q vs %q", plain.lastChar, cells.lastChar))
	}
	parser := func(e *emulator) string {
		return fmt.Sprint(e.st, e.params[:e.nparams], e.sub[:e.nparams], e.inParam, e.prefix, e.inter, e.osc, e.oscLong, e.dcsFinal)
	}
	if a, b := parser(plain), parser(cells); a != b {
		d = append(d, fmt.Sprintf("parser %s vs %s", a, b))
	}
	return d
}

// sameState fails t when the twins differ in model state or snapshot.
// The snapshot makes rows cells, so it comes last.
func sameState(t *testing.T, what string, plain, cells *emulator) {
	t.Helper()
	if d := twinDiff(plain, cells); len(d) > 0 {
		t.Fatalf("%s: plain rows differ from cells:\n%s", what, strings.Join(d, "\n"))
	}
	if a, b := plain.snapshot(), cells.snapshot(); a != b {
		t.Fatalf("%s: snapshots differ:\n%q\n%q", what, a, b)
	}
}

func plainRows(e *emulator) int {
	n := 0
	for _, r := range e.cur().lines {
		if r.plain {
			n++
		}
	}
	return n
}

// TestPlainRowsMatchCells: random output, mostly plain text, mixed with
// everything that touches a row (colours, wide and combining characters,
// erasures inside and at the end of text, insert mode, charsets, scroll
// regions, the alternate screen, resizes) leaves both twins alike.
func TestPlainRowsMatchCells(t *testing.T) {
	pieces := []string{
		"hello world ", "0123456789abcdefghij", "x", "\r\n", "\n", "\r", " ", "~", "\t", "\b",
		"\x1b[31m", "\x1b[0m", "\x1b[1;4;7m", "\x1b[48;5;200m", "\x1b[41m", "\x1b[m",
		"漢", "😀", "e\u0301", "\u0301", "é",
		"\x1b[H", "\x1b[3;5H", "\x1b[2A", "\x1b[5C", "\x1b[3D", "\x1b[G", "\x1b[12G",
		"\x1b[K", "\x1b[1K", "\x1b[2K", "\x1b[J", "\x1b[1J", "\x1b[2J", "\x1b[3J", "\x1b[3X", "\x1b[P", "\x1b[2@",
		"\x1b[2;5r", "\x1b[r", "\x1b[L", "\x1b[M", "\x1b[S", "\x1b[T", "\x1bM", "\x1bD", "\x1bE",
		"\x1b[?7l", "\x1b[?7h", "\x1b[4h", "\x1b[4l", "\x1b(0", "\x1b(B", "\x0e", "\x0f",
		"\x1b[?1049h", "\x1b[?1049l", "\x1b[?47h", "\x1b[?47l", "\x1b7", "\x1b8",
		"\x1b[3b", "\x1b#8", "\x1bc", "\x1b[!p",
	}
	rng := rand.New(rand.NewSource(17))
	for n := 0; n < 300; n++ {
		rows, cols := 2+rng.Intn(8), 1+rng.Intn(30)
		plain, cells := plainTwins(rows, cols, rng.Intn(12))
		sawPlain := false
		for k := 0; k < 60; k++ {
			var b strings.Builder
			for j := rng.Intn(8); j >= 0; j-- {
				p := pieces[rng.Intn(len(pieces))]
				if rng.Intn(3) > 0 {
					p = pieces[rng.Intn(6)] // mostly plain text and line ends
				}
				b.WriteString(p)
			}
			plain.write(b.String())
			cells.write(b.String())
			if rng.Intn(25) == 0 {
				r, c := 2+rng.Intn(8), 1+rng.Intn(30)
				plain.resize(r, c)
				cells.resize(r, c)
			}
			sawPlain = sawPlain || plainRows(plain) > 0
			if d := twinDiff(plain, cells); len(d) > 0 {
				t.Fatalf("case %d step %d (%dx%d): plain rows differ from cells:\n%s", n, k, plain.rows, plain.cols, strings.Join(d, "\n"))
			}
		}
		if !sawPlain {
			t.Fatalf("case %d: no row was ever plain: the test does not exercise them", n)
		}
		sameState(t, fmt.Sprintf("case %d", n), plain, cells)
	}
}

// TestLineEndsMatchTable: the CR and LF shortcut does what the state
// table does, down to the pending wrap, LNM and what REP repeats.
func TestLineEndsMatchTable(t *testing.T) {
	for _, in := range []string{
		"ab\r\x1b[3b", "ab\n\x1b[3b", "ab\r\nc", "abcde\r", "abcde\n", "abcde\r\nf",
		"\x1b[20hab\ncd", "\x1b[2;3rab\n\n\n\nx", "\x1b[?1049hab\n\n\n\n\nx", "\x1b[31mab\r\ncd",
		"\x1bcabcde\rx", "\x1bcab\n\x1b[3b", "\x1bc\x1b[20hab\ncd", // after a full reset too
	} {
		plain, cells := plainTwins(3, 5, 4)
		plain.write(in)
		cells.write(in)
		sameState(t, fmt.Sprintf("%q", in), plain, cells)
	}
}

// TestPlainRowsStayPlain: text scrolling by is printed and pushed to the
// scrollback as bytes; a coloured line is cells until it scrolls away.
func TestPlainRowsStayPlain(t *testing.T) {
	plain, cells := plainTwins(24, 80, 100)
	var out strings.Builder
	for i := range 500 {
		fmt.Fprintf(&out, "line %d of the output, a little longer than most\r\n", i)
	}
	plain.write(out.String())
	cells.write(out.String())
	if n := plainRows(plain); n != 24 {
		t.Fatalf("%d of 24 rows plain after plain output, want all", n)
	}
	for i := 0; i < plain.sb.len(); i++ {
		if l := plain.sb.at(i); !l.isPlain || !strings.HasPrefix(string(l.plain), "line ") {
			t.Fatalf("scrollback line %d = %+v, want plain text", i, l)
		}
	}
	colour := "\x1b[31mred\x1b[0m and not\r\n"
	plain.write(colour)
	cells.write(colour)
	if n := plainRows(plain); n != 23 {
		t.Fatalf("%d of 24 rows plain after a coloured line, want 23", n)
	}
	plain.write(out.String()[:2000])
	cells.write(out.String()[:2000])
	if n := plainRows(plain); n != 24 {
		t.Fatalf("%d of 24 rows plain once the coloured line scrolled away, want 24", n)
	}
	sameState(t, "after plain output", plain, cells)
}

// FuzzEmulatorPlainRows: any output, and resizes within it, leave the twins
// alike. The first two bytes choose the size; a 0xFF byte (never UTF-8)
// followed by two more resizes both twins.
func FuzzEmulatorPlainRows(f *testing.F) {
	f.Add([]byte("\x05\x0ahello world\r\nand more text that wraps\x1b[K\r\n\x1b[31mred\x1b[m"))
	f.Add([]byte("\x03\x04abcdefgh\x1b[2;3Hx\x1b[1K\x1b[4hyy\x1b[4l\x1b[P漢e\u0301\r\n\n\n"))
	f.Add([]byte("\x02\x01a\r\nb\x1b[?1049hc\x1b[41m\x1b[2J\x1b[?1049l\x1b(0q\x1b(B\x1b[3X"))
	f.Add([]byte("\x04\x0aline one\r\nline two is longer\xff\x02\x05more\r\ntext\xff\x08\x1ewide again\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 4096 {
			return
		}
		size := func(b []byte) (int, int) { return 1 + int(b[0])%12, 1 + int(b[1])%40 }
		rows, cols := size(data)
		plain, cells := plainTwins(rows, cols, 8)
		for k, part := range bytes.Split(data[2:], []byte{0xFF}) {
			if k > 0 {
				if len(part) < 2 {
					continue
				}
				r, c := size(part)
				plain.resize(r, c)
				cells.resize(r, c)
				part = part[2:]
			}
			s := strings.ToValidUTF8(string(part), "\uFFFD")
			plain.write(s)
			cells.write(s)
			if d := twinDiff(plain, cells); len(d) > 0 {
				t.Fatalf("after part %d (%dx%d): plain rows differ from cells:\n%s", k, plain.rows, plain.cols, strings.Join(d, "\n"))
			}
		}
		sameState(t, fmt.Sprintf("%dx%d", plain.rows, plain.cols), plain, cells)
	})
}
