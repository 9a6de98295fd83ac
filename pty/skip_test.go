package pty

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// randomPlain returns n bytes of plain text: lines of random length
// (some longer than cols), CRs inside lines, bare LFs and CRLFs.
func randomPlain(r *rand.Rand, n, cols int) string {
	var b strings.Builder
	for b.Len() < n {
		m := r.IntN(3 * cols)
		for range m {
			if r.IntN(40) == 0 {
				b.WriteByte('\r')
				continue
			}
			b.WriteByte(byte(0x20 + r.IntN(0x5f)))
		}
		switch r.IntN(6) {
		case 0:
			b.WriteByte('\n')
		default:
			b.WriteString("\r\n")
		}
	}
	return b.String()
}

// split cuts s into pieces of random sizes up to max.
func split(r *rand.Rand, s string, max int) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), 1+r.IntN(max))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// applySkipping writes texts to e as the terminal's emulator goroutine
// does: skipping what skippable allows.
func applySkipping(e *emulator, texts []string) bool {
	k, off, ok := e.skippable(texts)
	if !ok {
		for _, t := range texts {
			e.write(t)
		}
		return false
	}
	e.skipTo()
	e.write(texts[k][off:])
	for _, t := range texts[k+1:] {
		e.write(t)
	}
	return true
}

// TestSkipSnapshotExact: an emulator that skips what scrolls out of the
// scrollback gives the same snapshot as one that applied every byte,
// whatever came before (colours, wide characters, modes, a partial
// line) and wherever the items are cut.
func TestSkipSnapshotExact(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 4))
	preludes := []string{
		"",
		"\x1b[31;44mred on blue\x1b[0m\r\n漢字 wide\r\n",
		"\x1b[?7l no autowrap from here " + strings.Repeat("x", 40) + "\r\n",
		"\x1b[4h insert mode \x1b(0 line drawing \r\n",
		"\x1b[7m reversed pen for what follows",
		"partial line without an end",
		"\x1b[2;5r scroll region \x1b[?1049h alt screen\r\n",
	}
	skipped := 0
	for iter := range 300 {
		rows, cols, sb := 2+r.IntN(8), 4+r.IntN(30), r.IntN(40)
		if iter%10 == 0 {
			sb = 0
		}
		full, skip := newEmulator(rows, cols, sb), newEmulator(rows, cols, sb)
		pre := preludes[iter%len(preludes)]
		full.write(pre)
		skip.write(pre)
		for round := range 4 {
			texts := split(r, randomPlain(r, r.IntN(60*(rows+sb)*2+1), cols), 1+r.IntN(200))
			for _, s := range texts {
				full.write(s)
			}
			if applySkipping(skip, texts) {
				skipped++
			}
			if a, b := full.snapshot(), skip.snapshot(); a != b {
				t.Fatalf("iteration %d round %d (%dx%d, scrollback %d, prelude %q): snapshots differ\nfull: %q\nskip: %q", iter, round, rows, cols, sb, pre, a, b)
			}
			if full.x != skip.x || full.y != skip.y || full.pending != skip.pending || full.lastChar != skip.lastChar {
				t.Fatalf("iteration %d round %d: cursor state differs: full %d,%d,%v,%q skip %d,%d,%v,%q", iter, round,
					full.x, full.y, full.pending, full.lastChar, skip.x, skip.y, skip.pending, skip.lastChar)
			}
		}
	}
	if skipped < 100 {
		t.Fatalf("only %d runs skipped anything: the test does not exercise skipping", skipped)
	}
}

// TestSkippableRefuses: no skip across anything but plain text, nor when
// the state is not the normal screen's full scroll region in the ground
// state, nor when the rest does not scroll far enough.
func TestSkippableRefuses(t *testing.T) {
	lines := strings.Repeat("0123456789\r\n", 200)
	e := newEmulator(5, 20, 50)
	if _, _, ok := e.skippable([]string{lines, lines}); !ok {
		t.Fatal("plain lines not skippable")
	}
	for _, bad := range []string{"\x1b[1m", "\t", "\x08", "é", "\x0e"} {
		if _, _, ok := e.skippable([]string{lines + bad, lines}); ok {
			t.Errorf("skippable across %q", bad)
		}
		if _, _, ok := e.skippable([]string{lines, bad + lines}); ok {
			t.Errorf("skippable with %q in the rest", bad)
		}
	}
	if _, _, ok := e.skippable([]string{lines[:12*30], lines[:12*30]}); ok {
		t.Error("skippable though the rest scrolls fewer than rows + scrollback times")
	}
	for _, state := range []string{"\x1b[2;4r", "\x1b[?1049h", "\x1b["} {
		s := newEmulator(5, 20, 50)
		s.write(state)
		if _, _, ok := s.skippable([]string{lines, lines}); ok {
			t.Errorf("skippable after %q", state)
		}
	}
}
