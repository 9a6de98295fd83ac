package pty

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkASCII panics when feed calls a text ASCII that is not: its
// messages would be escaped as ASCII (Message.Escaped) and their frames
// would not be JSON.
func checkASCII(text string, ascii bool) {
	if !ascii {
		return
	}
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			panic(fmt.Sprintf("feed says %q is ASCII", text))
		}
	}
}

// feedSplit runs input through a fresh filter cut at the given points.
func feedSplit(input string, cuts []int) (string, []query) {
	var f filter
	var out strings.Builder
	var qs []query
	prev := 0
	for _, c := range append(cuts, len(input)) {
		text, ascii, q := f.feed([]byte(input[prev:c]), false)
		checkASCII(text, ascii)
		for _, x := range q {
			x.off += out.Len()
			qs = append(qs, x)
		}
		out.WriteString(text)
		prev = c
	}
	text, ascii, q := f.feed(nil, true)
	checkASCII(text, ascii)
	for _, x := range q {
		x.off += out.Len()
		qs = append(qs, x)
	}
	out.WriteString(text)
	return out.String(), qs
}

func TestFilter(t *testing.T) {
	tests := []struct {
		in      string
		out     string
		queries []string
	}{
		{"plain text", "plain text", nil},
		{"a\x1b[cb", "ab", []string{"\x1b[c"}},
		{"a\x1b[0cb", "ab", []string{"\x1b[0c"}},
		{"a\x1b[>cb\x1b[>0c", "ab", []string{"\x1b[>c", "\x1b[>0c"}},
		{"\x1b[5n\x1b[6n\x1b[?6n", "", []string{"\x1b[5n", "\x1b[6n", "\x1b[?6n"}},
		{"x\x1b[?2004$py\x1b[4$p", "xy", []string{"\x1b[?2004$p", "\x1b[4$p"}},
		{"\x1bP$qm\x1b\\z", "z", []string{"\x1bP$qm"}},
		{"\x1b[>qq", "q", []string{"\x1b[>q"}},
		{"\x1b]11;?\x07.", ".", []string{"\x1b]11;?\x07"}},
		{"\x1b]10;?\x1b\\.", ".", []string{"\x1b]10;?"}},
		{"\x1b]4;1;?;2;?\x07", "", []string{"\x1b]4;1;?;2;?\x07"}},
		{"\x1b]4;1;#ff0000;2;?\x07", "\x1b]4;1;#ff0000\x07", []string{"\x1b]4;1;#ff0000;2;?\x07"}},
		{"\u009b6n!", "!", []string{"\u009b6n"}},
		// Not queries: pass through untouched.
		{"\x1b[1;31mred\x1b[0m", "\x1b[1;31mred\x1b[0m", nil},
		{"\x1b]0;title\x07\x1b]11;#000000\x07", "\x1b]0;title\x07\x1b]11;#000000\x07", nil},
		{"\x1b[2J\x1b[H\x1b7\x1b8", "\x1b[2J\x1b[H\x1b7\x1b8", nil},
		{"\x1bP+q544e\x1b\\", "\x1bP+q544e\x1b\\", nil},
		// A query inside an OSC title is not a query; one after it is.
		{"\x1b]0;a\x1b[6n", "\x1b]0;a", []string{"\x1b[6n"}},
		// UTF-8.
		{"é€😀", "é€😀", nil},
		{"a\xffb\xc3", "a\ufffdb\ufffd", nil},
		{"\xe2\x82\x1b[6n\xac", "\ufffd\ufffd\ufffd", []string{"\x1b[6n"}},
	}
	for _, tc := range tests {
		// Every way of cutting the input in two or three must give the same result.
		for c1 := 0; c1 <= len(tc.in); c1++ {
			for c2 := c1; c2 <= len(tc.in); c2++ {
				out, qs := feedSplit(tc.in, []int{c1, c2})
				var got []string
				for _, q := range qs {
					got = append(got, q.raw)
				}
				if out != tc.out || strings.Join(got, "|") != strings.Join(tc.queries, "|") {
					t.Fatalf("filter(%q) cut at %d,%d = %q %q, want %q %q", tc.in, c1, c2, out, got, tc.out, tc.queries)
				}
			}
		}
	}
}

func TestFilterQueryOffsets(t *testing.T) {
	out, qs := feedSplit("ABCD\x1b[6nEF\x1b[cGH", []int{6})
	if out != "ABCDEFGH" || len(qs) != 2 || qs[0].off != 4 || qs[1].off != 6 {
		t.Fatalf("got %q %+v", out, qs)
	}
}

// TestFilterHoldBound proves the held-back prefix never exceeds
// maxQueryLen+1 bytes: a long sequence that could have been a query is
// passed through once it is too long.
func TestFilterHoldBound(t *testing.T) {
	var f filter
	long := "\x1b]4;1;" + strings.Repeat("x", 1000)
	var out strings.Builder
	for i := 0; i < len(long); i++ {
		text, _, qs := f.feed([]byte{long[i]}, false)
		out.WriteString(text)
		if len(qs) != 0 {
			t.Fatal("unexpected query")
		}
		if len(f.hold) > maxQueryLen+1 {
			t.Fatalf("hold = %d bytes, bound %d", len(f.hold), maxQueryLen+1)
		}
	}
	text, _, _ := f.feed([]byte("\x07"), true)
	out.WriteString(text)
	if out.String() != long+"\x07" {
		t.Fatalf("long OSC not passed through intact")
	}
}

// FuzzFilter: never panics, output is valid UTF-8, and splitting the input
// anywhere never changes the result.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{"a\x1b[6nb", "\x1b]11;?\x07", "\xe2\x82\xac", "\x1bP$qm\x1b\\", "\u009b6n", "\x1b]0;t\x1b[c"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		if cut < 0 || cut > len(s) {
			cut = len(s) / 2
		}
		a, qa := feedSplit(s, nil)
		b, qb := feedSplit(s, []int{cut})
		if !utf8.ValidString(a) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		if a != b || len(qa) != len(qb) {
			t.Fatalf("split at %d changes %q: %q/%d vs %q/%d", cut, s, a, len(qa), b, len(qb))
		}
	})
}

func TestFilterRandomSplits(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pieces := []string{"a", "é", "漢", "😀", "\x1b[6n", "\x1b[31m", "\x1b]0;t\x07", "\x1b]11;?\x1b\\", "\x1b[c", "\r\n", "\xff", "\x1bP$qr\x1b\\", "\u009b5n"}
	for n := 0; n < 200; n++ {
		var b strings.Builder
		for k := 0; k < 50; k++ {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		s := b.String()
		want, wq := feedSplit(s, nil)
		var cuts []int
		for c := rng.Intn(7) + 1; c < len(s); c += rng.Intn(7) + 1 {
			cuts = append(cuts, c)
		}
		got, gq := feedSplit(s, cuts)
		if got != want || len(gq) != len(wq) {
			t.Fatalf("random cuts changed the result for %q", s)
		}
		for i := range gq {
			if gq[i] != wq[i] {
				t.Fatalf("query %d: %+v vs %+v", i, gq[i], wq[i])
			}
		}
	}
}

// TestFilterASCII: a read of ASCII output is said to be ASCII (its
// messages are then written escaped twice, Message.Escaped); one with
// other characters, or an invalid byte, is not.
func TestFilterASCII(t *testing.T) {
	for _, tc := range []struct {
		in    string
		ascii bool
	}{
		{"total 48\r\ndrwxr-xr-x \x1b[1;34msrc\x1b[0m\r\n", true},
		{strings.Repeat("0123456789", 100), true},
		{"caf\xc3\xa9\r\n", false},
		{"abc\xff", false},
		{strings.Repeat("a", 77) + "\x80", false},
	} {
		var f filter
		text, ascii, _ := f.feed([]byte(tc.in), true)
		if ascii != tc.ascii {
			t.Errorf("feed(%.40q): ascii %v, want %v (text %.40q)", tc.in, ascii, tc.ascii, text)
		}
	}
}
