package pty

import (
	"fmt"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/ahp-dev/ahpd/flow"
)

// What a viewer writes around a snapshot's preview, for the black-box tests.
const (
	PreviewBefore = previewBefore
	PreviewAfter  = previewAfter
	PreviewEnd    = previewEnd
)

// Emulator exposes the headless emulator to the black-box tests.
type Emulator struct{ e *emulator }

func NewEmulator(rows, cols, scrollback int) *Emulator {
	return &Emulator{newEmulator(rows, cols, scrollback)}
}

func (e *Emulator) Write(s string)        { e.e.write(s) }
func (e *Emulator) Resize(rows, cols int) { e.e.resize(rows, cols) }
func (e *Emulator) Reset(rows, cols int) {
	sb := e.e.sb.max
	*e = Emulator{newEmulator(rows, cols, sb)}
}
func (e *Emulator) Snapshot() string       { return e.e.snapshot() }
func (e *Emulator) Preview() string        { return e.e.preview() }
func (e *Emulator) Answer(q string) string { return string(e.e.answer(q)) }
func (e *Emulator) Cursor() (x, y int, pending bool) {
	return e.e.x, e.e.y, e.e.pending
}
func (e *Emulator) ScrollbackLen() int { return e.e.sb.len() }
func (e *Emulator) Title() string      { return e.e.title }
func (e *Emulator) Alt() bool          { return e.e.alt }

// LineText returns the text of screen row y (of the active screen) with
// empty cells as spaces and trailing spaces removed.
func (e *Emulator) LineText(y int) string {
	return e.e.lineText(cellsOf(e.e.cur().lines[y]))
}

// cellsOf returns r's cells without making a plain row cells: Diff and
// LineText must not change what they look at.
func cellsOf(r *row) []cell {
	if !r.plain {
		return r.cells
	}
	c := make([]cell, len(r.cells))
	for i, b := range r.text {
		c[i] = cell{ch: rune(b)}
	}
	return c
}

func (e *emulator) lineText(line []cell) string {
	var b strings.Builder
	for _, c := range line {
		switch {
		case c.ch == tailRune:
		case c.ch == 0:
			b.WriteByte(' ')
		default:
			b.WriteString(e.cellText(c.ch))
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// Emulator returns a copy of the terminal's emulator once it has applied
// everything read so far.
func (t *Terminal) EmulatorCopy() *Emulator {
	t.emuMu.Lock()
	defer t.emuMu.Unlock()
	snap := t.emu.snapshot()
	c := newEmulator(t.emu.rows, t.emu.cols, t.emu.sb.max)
	c.write(snap)
	return &Emulator{c}
}

// WithEmulator runs f with the terminal's own emulator locked.
func (t *Terminal) WithEmulator(f func(*Emulator)) {
	t.emuMu.Lock()
	defer t.emuMu.Unlock()
	f(&Emulator{t.emu})
}

// Diff lists every difference in model state between a and b: cells
// (text and attributes) of both screens and the scrollback, cursor, pen,
// modes, title, scroll regions, saved cursors, charsets, colours, tabs.
func Diff(a, b *Emulator) []string {
	var d []string
	x, y := a.e, b.e
	add := func(f string, args ...any) {
		if len(d) < 40 {
			d = append(d, fmt.Sprintf(f, args...))
		}
	}
	if x.rows != y.rows || x.cols != y.cols {
		add("size %dx%d vs %dx%d", x.rows, x.cols, y.rows, y.cols)
		return d
	}
	cellStr := func(e *emulator, c cell) string {
		return fmt.Sprintf("%q fg=%08x bg=%08x", e.cellText(c.ch)+map[bool]string{true: "<tail>"}[c.ch == tailRune], c.fg, c.bg)
	}
	cmpLine := func(what string, la, lb []cell) {
		n := max(len(la), len(lb))
		for i := 0; i < n; i++ {
			var ca, cb cell
			if i < len(la) {
				ca = la[i]
			}
			if i < len(lb) {
				cb = lb[i]
			}
			if cellStr(x, ca) != cellStr(y, cb) {
				add("%s col %d: %s vs %s", what, i, cellStr(x, ca), cellStr(y, cb))
			}
		}
	}
	if x.sb.len() != y.sb.len() {
		add("scrollback %d vs %d lines", x.sb.len(), y.sb.len())
	} else {
		for i := 0; i < x.sb.len(); i++ {
			cmpLine(fmt.Sprintf("scrollback %d", i), x.sb.at(i).line(new([]cell)), y.sb.at(i).line(new([]cell)))
		}
	}
	for k := 0; k < 2; k++ {
		if k == 1 && !x.alt && !y.alt {
			continue
		}
		for r := 0; r < x.rows; r++ {
			cmpLine(fmt.Sprintf("screen %d row %d", k, r), cellsOf(x.scr[k].lines[r]), cellsOf(y.scr[k].lines[r]))
		}
		if x.scr[k].top != y.scr[k].top || x.scr[k].bot != y.scr[k].bot {
			add("screen %d region %d-%d vs %d-%d", k, x.scr[k].top, x.scr[k].bot, y.scr[k].top, y.scr[k].bot)
		}
		if x.scr[k].saved != y.scr[k].saved {
			add("screen %d saved %+v vs %+v", k, x.scr[k].saved, y.scr[k].saved)
		}
	}
	type st struct {
		X, Y                                   int
		Pending, Alt                           bool
		Fg, Bg                                 uint32
		CK, KP, Origin, AW, Blink, Hidden, Ins bool
		LNM, Focus, BP                         bool
		Mouse, Enc, Style                      int
		Title                                  string
		Charsets                               [4]byte
		GL                                     int
		Pal                                    string
		Dyn                                    [3]string
		Tabs                                   string
	}
	get := func(e *emulator) st {
		cs := e.charsets
		for i := range cs {
			if cs[i] == 'B' {
				cs[i] = 0
			}
		}
		return st{e.x, e.y, e.pending, e.alt, e.fg, e.bg, e.cursorKeys, e.keypad, e.origin, e.autowrap,
			e.cursorBlink, e.cursorHidden, e.insert, e.lnm, e.focus, e.bracketedPaste, e.mouse, e.mouseEnc,
			e.cursorStyle, e.title, cs, e.gl, fmt.Sprint(e.palette), e.dynamic, fmt.Sprint(e.tabs)}
	}
	if sa, sb := get(x), get(y); sa != sb {
		add("state %+v\n   vs %+v", sa, sb)
	}
	return d
}

// StallEmulator stops the emulator (it waits for its lock) until the
// returned function is called: the tests' way to make it lag the reader.
func (t *Terminal) StallEmulator() (resume func()) {
	t.emuMu.Lock()
	return t.emuMu.Unlock
}

// MessageText is messageText, for the black-box tests.
func MessageText(t testing.TB, m flow.Message) string { return messageText(t, m) }

// SteadyWriterEnv makes the test binary a program that, after a line of
// input, writes N pieces of 4 KiB of 'a' with 300 µs between them and
// exits (main_test.go's TestMain; TestSteadyOutputWakesLazily).
const SteadyWriterEnv = "AHP_PTY_TEST_STEADY_WRITER"

// StreamWriterEnv makes the test binary a program that, after a line of
// input, writes a varied terminal stream ("SEED:PIECES": text, CJK, emoji,
// combining marks, SGR, cursor moves, erases, scroll regions, the
// alternate screen, titles, invalid bytes), cut into writes at random
// bytes, UTF-8 sequences included, and exits (main_test.go; the
// recording tests).
const StreamWriterEnv = "AHP_PTY_TEST_STREAM_WRITER"

// FloodWriterEnv makes the test binary a program that, after a line of
// input, writes N bytes of numbered lines as fast as the PTY takes them
// and exits.
const FloodWriterEnv = "AHP_PTY_TEST_FLOOD_WRITER"

// MessageBuffers returns the bytes of message buffer the viewers hold
// (the capacity of each one's buffer). Call it from the goroutine that
// pulls them: the buffer is that goroutine's.
func MessageBuffers(vs []*Viewer) int {
	n := 0
	for _, v := range vs {
		n += cap(v.buf)
	}
	return n
}

// SnapshotsHeld returns how many snapshot texts the viewers and their
// terminal keep alive between them, and their bytes.
func SnapshotsHeld(vs []*Viewer) (n, bytes int) {
	seen := map[*snapData]bool{}
	add := func(d *snapData) {
		if d != nil && !seen[d] {
			seen[d] = true
			bytes += len(d.esc)
		}
	}
	for _, v := range vs {
		if v.snap != nil {
			add(v.snap.snap.data.Load())
		}
		v.t.emuMu.Lock()
		for _, s := range v.t.snaps {
			add(s.data.Load())
		}
		v.t.emuMu.Unlock()
	}
	return len(seen), bytes
}

// MaxSnapshots is maxSnapshots, SnapReuse snapReuse.
const (
	MaxSnapshots = maxSnapshots
	SnapReuse    = snapReuse
)

// WinSize reads the PTY's size from the kernel (TIOCGWINSZ on the master),
// which is what the program sees.
func (t *Terminal) WinSize() (rows, cols int, err error) {
	ws, err := pty.GetsizeFull(t.master)
	if err != nil {
		return 0, 0, err
	}
	return int(ws.Rows), int(ws.Cols), nil
}
