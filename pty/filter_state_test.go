package pty

import (
	"bytes"
	"strings"
	"testing"
)

// feedRest feeds s and the end of the stream to f, returning the text and
// the queries' raw forms.
func feedRest(f *filter, s string) (string, []string) {
	var out strings.Builder
	var qs []string
	for _, final := range []bool{false, true} {
		in := []byte(s)
		if final {
			in = nil
		}
		text, _, q := f.feed(in, final)
		for _, x := range q {
			qs = append(qs, x.raw)
		}
		out.WriteString(text)
	}
	return out.String(), qs
}

// checkFilterHandover feeds s[:cut] to a filter, hands its state to a
// second one, and checks that both give the same text and queries for
// the rest of s.
func checkFilterHandover(t *testing.T, s string, cut int) {
	t.Helper()
	var a filter
	a.feed([]byte(s[:cut]), false)
	state := a.appendState(nil)
	b, rest, err := decodeFilterState(append(state, 0xAA))
	if err != nil {
		t.Fatalf("%q cut at %d: %v (state % x)", s, cut, err, state)
	}
	if !bytes.Equal(rest, []byte{0xAA}) {
		t.Fatalf("%q cut at %d: %d bytes left after the state, want the 1 that follows it", s, cut, len(rest))
	}
	if again := b.appendState(nil); !bytes.Equal(again, state) {
		t.Fatalf("%q cut at %d: state re-encodes as % x, was % x", s, cut, again, state)
	}
	wantText, wantQ := feedRest(&a, s[cut:])
	gotText, gotQ := feedRest(b, s[cut:])
	if gotText != wantText || strings.Join(gotQ, "|") != strings.Join(wantQ, "|") {
		t.Fatalf("%q cut at %d: after the hand-over %q %q, without it %q %q", s, cut, gotText, gotQ, wantText, wantQ)
	}
}

// TestFilterStateHandover: a character, a query and an escape sequence
// split by the hand-over come out whole, at every cut.
func TestFilterStateHandover(t *testing.T) {
	for _, s := range []string{
		"abc 漢字 😀 é",
		"a\x1b[6nb\x1b]11;?\x07c",
		"x\x1bP$qm\x1b\\y",
		"\x1b]11;?\x1b\\\x1b\\z",
		"a\u009b6nb",
		"\x1b[31mred\x1b[m",
		strings.Repeat("\x1b]0;", 1) + strings.Repeat("t", 300) + "\x07done",
	} {
		for cut := 0; cut <= len(s); cut++ {
			checkFilterHandover(t, s, cut)
		}
	}
}

func TestFilterStateRefusals(t *testing.T) {
	var f filter
	f.feed([]byte("a\x1b[6"), false)
	good := f.appendState(nil)
	for n := range len(good) {
		if _, _, err := decodeFilterState(good[:n]); err == nil {
			t.Errorf("state truncated to %d of %d bytes decoded", n, len(good))
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"version", []byte{2, 0, 0, 0, 0, 0}, "version 2"},
		{"state", []byte{1, numStates, 0, 0, 0, 0}, "parser state"},
		{"flags", []byte{1, 0, 0, 2, 0, 0}, "flags"},
		{"long hold", append([]byte{1, 0, 0, 0, 0x82, 0x02}, make([]byte, 258)...), "held query of 258 bytes"},
		{"long tail", []byte{1, 0, 0, 0, 0, 4, 0xf0, 0x9f, 0x98, 0x80}, "UTF-8 tail of 4 bytes"},
		{"complete tail", []byte{1, 0, 0, 0, 0, 2, 0xc3, 0xa9}, "not the start of an incomplete sequence"},
		{"continuation", []byte{1, 0, 0, 0, 0, 1, 0x80}, "not the start of an incomplete sequence"},
	} {
		if _, _, err := decodeFilterState(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// FuzzFilterStateHandover: any output cut anywhere comes out the same
// with a hand-over at the cut; any state decodes or fails cleanly, and
// what decodes re-encodes to itself.
func FuzzFilterStateHandover(f *testing.F) {
	for _, s := range []string{"a\x1b[6nb", "\x1b]11;?\x07", "\xe2\x82\xac", "\x1bP$qm\x1b\\", "\u009b6n"} {
		f.Add(s, 3, []byte{})
	}
	f.Add("", 0, []byte{1, 4, 4, 0, 2, 0x1b, '[', 0})
	f.Fuzz(func(t *testing.T, s string, cut int, state []byte) {
		if cut < 0 || cut > len(s) {
			cut = len(s) / 2
		}
		checkFilterHandover(t, s, cut)
		g, rest, err := decodeFilterState(state)
		if err != nil {
			return
		}
		if again := g.appendState(nil); !bytes.Equal(again, state[:len(state)-len(rest)]) {
			t.Fatalf("state % x re-encodes as % x", state[:len(state)-len(rest)], again)
		}
		feedRest(g, s) // must not panic
	})
}
