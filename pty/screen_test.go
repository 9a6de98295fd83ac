package pty_test

import (
	"testing"

	"github.com/ahp-dev/ahpd/pty"
)

// TestScreenRestore: a terminal that got the host's output, then other
// writes (a cursor move, another pen, a printed character: a predicted
// key), then AppendRestore, goes on exactly as the host's screen does:
// the same cells after the next output, which prints, repeats the last
// character (REP) and relies on a pending wrap.
func TestScreenRestore(t *testing.T) {
	for _, host := range []string{
		"$ ",
		"$ ab",
		"\x1b[31m$ red",
		"\x1b[3;5Hx\x1b[1m",
		"0123456789",     // a wrap is pending in the last column
		"01234567\u4e2d", // a wide character ends the line
		"ab\x1b[C",       // a cursor move after the print: REP repeats nothing
		"\x1b[?1049h\x1b[2;2Hvi",
	} {
		h, term := pty.NewScreen(4, 10), pty.NewScreen(4, 10)
		h.Write(host)
		term.Write(host)
		term.Write("\x1b[4;1H\x1b[4;35mZ\x1b[1;1H")
		term.Write(string(h.AppendRestore(nil)))
		for _, s := range []string{"", "Q\x1b[2b", "\x1b[b", "k"} {
			h.Write(s)
			term.Write(s)
		}
		rows, cols := h.Size()
		for y := range rows {
			for x := range cols {
				if y == 3 && x == 0 {
					continue // the other write's cell: not the host's business
				}
				if got, want := string(term.AppendCell(nil, x, y)), string(h.AppendCell(nil, x, y)); got != want {
					t.Errorf("after %q: cell (%d,%d) = %q, want %q", host, x, y, got, want)
				}
			}
		}
		hx, hy, hp := h.Cursor()
		if x, y, p := term.Cursor(); x != hx || y != hy || p != hp {
			t.Errorf("after %q: cursor (%d,%d,%v), want (%d,%d,%v)", host, x, y, p, hx, hy, hp)
		}
	}
}

// TestScreenWriteBytes: WriteBytes keeps nothing of its input, so the
// caller's buffer may be reused (a combining cluster and a wide character
// still read back after it is overwritten), and it does not allocate for
// plain output.
func TestScreenWriteBytes(t *testing.T) {
	s := pty.NewScreen(2, 10)
	buf := []byte("e\u0301漢x")
	s.WriteBytes(buf)
	for i := range buf {
		buf[i] = '#'
	}
	for x, want := range []string{"e\u0301", "漢", "", "x"} {
		if got := s.Text(x, 0); got != want {
			t.Errorf("Text(%d, 0) after the buffer was reused = %q, want %q", x, got, want)
		}
	}
	line := []byte("abc\r\n")
	if n := testing.AllocsPerRun(100, func() { s.WriteBytes(line) }); n != 0 {
		t.Errorf("WriteBytes(%q) allocates %v times, want 0", line, n)
	}
}
