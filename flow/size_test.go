package flow_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
)

// sizeCases are strings whose sizes and encodings are checked against
// references; the fuzz targets are seeded from them too.
var sizeCases = []string{
	"",
	"a",
	"hello, world",
	"\x1b[31mred\x1b[0m\r\n",
	`"quoted" and \back\slashes\`,
	"<script>&amp;</script>",
	"\u2028\u2029",
	"日本語のテキスト",
	"😀👍🏽🇫🇷",
	"mixed ascii 日本 😀 \t\n\x00\x01\x1f\x7f",
	"\xff",
	"\xc3",       // truncated sequence
	"\xe6\x97",   // truncated 3-byte sequence
	"a\x80\x80b", // two stray continuation bytes
	"\xed\xa0\x80",
	"\xef\xbf\xbd",     // a real U+FFFD
	"\xf4\x90\x80\x80", // above U+10FFFF
	strings.Repeat("x", 100) + "😀",
}

// Runs of plain ASCII of every length around the 8-byte steps of the
// word-at-a-time scans, ended by each kind of byte they stop at.
func init() {
	for k := 0; k <= 17; k++ {
		run := strings.Repeat("x", k)
		for _, stop := range []string{"日", "😀", "\xff", "\"", "\\", "\n", "\x00", "\x7f"} {
			sizeCases = append(sizeCases, run+stop+run, stop+run, run+stop)
		}
	}
}

func TestUTF16Len(t *testing.T) {
	for _, s := range sizeCases {
		want := int64(2 * len(utf16.Encode([]rune(replaceInvalid(s)))))
		if got := flow.UTF16Len(s); got != want {
			t.Errorf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
		// []rune(s) itself turns each invalid byte into one U+FFFD.
		if want2 := int64(2 * len(utf16.Encode([]rune(s)))); want2 != want {
			t.Errorf("reference disagreement for %q: %d vs %d", s, want, want2)
		}
	}
}

// referenceEscape is encoding/json's string encoding without HTML
// escaping, adjusted for flow's documented differences: U+2028 and U+2029
// are not escaped.
func referenceEscape(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSuffix(buf.String(), "\n")
	out = strings.ReplaceAll(out, `\u2028`, "\u2028")
	out = strings.ReplaceAll(out, `\u2029`, "\u2029")
	return out
}

func TestEscapedLen(t *testing.T) {
	for _, s := range sizeCases {
		ref := referenceEscape(t, replaceInvalid(s))
		body := ref[1 : len(ref)-1]
		if got, want := flow.EscapedLen(s), flow.UTF16Len(body); got != want {
			t.Errorf("EscapedLen(%q) = %d, want %d (reference %s)", s, got, want, ref)
		}
		if got, want := flow.EscapedLen(s), flow.UTF16Len(string(flow.AppendJSONString(nil, s)))-4; got != want {
			t.Errorf("EscapedLen(%q) = %d, want %d (AppendJSONString)", s, got, want)
		}
		b, n := flow.AppendEscapedLen([]byte("p"), s)
		if string(b) != "p"+body || n != flow.UTF16Len(body) {
			t.Errorf("AppendEscapedLen(%q) = %q, %d; want %q, %d", s, b, n, "p"+body, flow.UTF16Len(body))
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range sizeCases {
		out := flow.AppendJSONString([]byte("prefix:"), s)
		if !bytes.HasPrefix(out, []byte("prefix:")) {
			t.Fatalf("AppendJSONString(%q) lost the prefix: %q", s, out)
		}
		out = out[len("prefix:"):]
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Errorf("AppendJSONString(%q) = %s, which encoding/json rejects: %v", s, out, err)
			continue
		}
		if want := replaceInvalid(s); got != want {
			t.Errorf("AppendJSONString(%q) decodes to %q, want %q", s, got, want)
		}
		// Only what JSON requires is escaped: the output is the
		// reference encoding.
		if want := referenceEscape(t, replaceInvalid(s)); string(out) != want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", s, out, want)
		}
	}
	// Every control character, '"' and '\\'.
	var all []byte
	for c := 0; c < 128; c++ {
		all = append(all, byte(c))
	}
	out := flow.AppendJSONString(nil, string(all))
	var got string
	if err := json.Unmarshal(out, &got); err != nil || got != string(all) {
		t.Errorf("AppendJSONString(ASCII) = %s, decodes to %q, %v", out, got, err)
	}
	if want := referenceEscape(t, string(all)); string(out) != want {
		t.Errorf("AppendJSONString(ASCII) = %s, want %s", out, want)
	}
}

func TestSizeNoAllocs(t *testing.T) {
	s := strings.Repeat("日本 😀 \x1b[0m", 100)
	if n := testing.AllocsPerRun(100, func() { flow.UTF16Len(s); flow.EscapedLen(s) }); n != 0 {
		t.Errorf("UTF16Len+EscapedLen allocate %v times, want 0", n)
	}
}

// checkEscapedPrefix checks EscapedPrefix(s, budget) against EscapedLen:
// a whole-character prefix whose body fits, and the longest one.
func checkEscapedPrefix(t testing.TB, s string, budget int64) {
	t.Helper()
	n, size := flow.EscapedPrefix(s, budget)
	switch {
	case n < 0 || n > len(s):
		t.Fatalf("EscapedPrefix(%q, %d) = %d, out of range", s, budget, n)
	case !charBoundary(s, n):
		t.Fatalf("EscapedPrefix(%q, %d) = %d splits a UTF-8 sequence", s, budget, n)
	case size != flow.EscapedLen(s[:n]):
		t.Fatalf("EscapedPrefix(%q, %d) = %d, %d; EscapedLen of the prefix is %d", s, budget, n, size, flow.EscapedLen(s[:n]))
	case size > max(budget, 0):
		t.Fatalf("EscapedPrefix(%q, %d) = %d, %d: over the budget", s, budget, n, size)
	}
	// The body of the prefix is the start of the body of s, and one more
	// character would not fit.
	if body := string(flow.AppendEscaped(nil, s)); !strings.HasPrefix(body, string(flow.AppendEscaped(nil, s[:n]))) {
		t.Fatalf("EscapedPrefix(%q, %d) = %d: the prefix escapes to %q, not a prefix of %q", s, budget, n, flow.AppendEscaped(nil, s[:n]), body)
	}
	if n < len(s) {
		_, k := utf8.DecodeRuneInString(s[n:])
		if next := flow.EscapedLen(s[:n+k]); next <= budget {
			t.Fatalf("EscapedPrefix(%q, %d) = %d, %d; the next character fits too (%d)", s, budget, n, size, next)
		}
	}
}

// charBoundary reports whether s[:n] ends at a character as the encoder
// reads s (an invalid byte is a character of its own).
func charBoundary(s string, n int) bool {
	i := 0
	for i < n {
		_, k := utf8.DecodeRuneInString(s[i:])
		i += k
	}
	return i == n
}

func TestEscapedPrefix(t *testing.T) {
	for _, s := range sizeCases {
		for budget := int64(-2); budget <= flow.EscapedLen(s)+2; budget++ {
			checkEscapedPrefix(t, s, budget)
		}
	}
	for _, tt := range []struct {
		s      string
		budget int64
		n      int
		size   int64
	}{
		{"hello", 6, 3, 6},
		{"hello", 7, 3, 6},
		{"a\nb", 5, 1, 2}, // \n costs 4
		{"a\nb", 6, 2, 6},
		{"\x01", 11, 0, 0}, // \u0001 costs 12
		{"\x01", 12, 1, 12},
		{"😀x", 3, 0, 0}, // a surrogate pair costs 4, not split
		{"😀x", 4, 4, 4},
		{"\xffab", 2, 1, 2}, // U+FFFD
		{"abc", 1 << 40, 3, 6},
	} {
		if n, size := flow.EscapedPrefix(tt.s, tt.budget); n != tt.n || size != tt.size {
			t.Errorf("EscapedPrefix(%q, %d) = %d, %d; want %d, %d", tt.s, tt.budget, n, size, tt.n, tt.size)
		}
	}
	s := strings.Repeat("日本 😀 \x1b[0m", 100)
	if n := testing.AllocsPerRun(100, func() { flow.EscapedPrefix(s, 1000) }); n != 0 {
		t.Errorf("EscapedPrefix allocates %v times, want 0", n)
	}
}
