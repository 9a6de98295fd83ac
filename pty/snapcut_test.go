package pty

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// TestSnapCut: a snapshot escaped once and cut at its marks gives each
// viewer the very messages that escaping its own copy gave: for any
// budget, the longest piece that fits (flow.EscapedPrefix), escaped as
// flow.AppendEscaped does, with the same size.
func TestSnapCut(t *testing.T) {
	pieces := []string{
		"plain text ", "\r\n", "\x1b[31m", "\x1b[m", "\"quoted\"", `back\slash`, "\\u", "\t", "\x00",
		"漢字", "e\u0301", "😀", "\xff", "\xe6\xbc", "\u2028", strings.Repeat("x", 5000),
	}
	rng := rand.New(rand.NewSource(5))
	for n := 0; n < 200; n++ {
		var b strings.Builder
		for k := rng.Intn(400); k > 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		text := b.String()
		d := newSnapData(text)
		if want := string(flow.AppendEscaped(nil, text)); d.esc != want {
			t.Fatalf("case %d: esc differs from AppendEscaped of the text", n)
		}
		off, eoff := 0, 0
		for step := 0; off < len(text) || eoff < len(d.esc); step++ {
			budget := int64(rng.Intn(3)) // 0, 2 or 4: not even a character, at times
			switch rng.Intn(3) {
			case 1:
				budget = int64(rng.Intn(64))
			case 2:
				budget = int64(rng.Intn(128 << 10))
			}
			k, want16 := flow.EscapedPrefix(text[off:], budget)
			end, got16 := d.snapCut(eoff, budget)
			want := string(flow.AppendEscaped(nil, text[off:off+k]))
			if got := d.esc[eoff:end]; got != want || got16 != want16 {
				t.Fatalf("case %d, step %d, budget %d: piece %q (%d), want %q (%d)", n, step, budget, got, got16, want, want16)
			}
			off, eoff = off+k, end
			if step > 1_000_000 {
				t.Fatal("no end")
			}
		}
	}
}

// BenchmarkSnapshotSend: one viewer's messages of a 10,000-line
// snapshot, 128 KiB at a time (maxOutputMessage), from the snapshot
// escaped once for all viewers.
func BenchmarkSnapshotSend(b *testing.B) {
	e := newEmulator(24, 80, 10000)
	e.write(string(plainText(2 << 20)))
	d := newSnapData(e.snapshot())
	buf := make([]byte, 0, maxOutputMessage)
	b.SetBytes(int64(len(d.esc)))
	for b.Loop() {
		for off := 0; off < len(d.esc); {
			end, _ := d.snapCut(off, maxOutputMessage-outEnvelope16)
			buf = append(append(append(buf[:0], outPrefix...), d.esc[off:end]...), outSuffix...)
			off = end
		}
	}
}
