package session

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

var recordingEndCases = []struct {
	in   string
	want int64
}{
	{"", 0},
	{"{}\n", 3},
	{"{}\n[0.1,\"o\",\"a\"]\n", 17},
	{"{}\n[0.1,\"o\",\"a\"]\n[0.2,\"o\",\"b", 17}, // a live file's incomplete last line
	{"no line end", 0},
	{"\n\n\n", 3},
}

// TestRecordingEnd: a read stops after the last complete line.
func TestRecordingEnd(t *testing.T) {
	for _, tc := range recordingEndCases {
		if got, err := RecordingEnd(bytes.NewReader([]byte(tc.in))); err != nil || got != tc.want {
			t.Errorf("RecordingEnd(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	// Past the look-back bound of a line: an error, not a scan of the
	// whole file.
	long := append([]byte("{}\n"), bytes.Repeat([]byte("x"), maxReadLine+8192)...)
	if _, err := RecordingEnd(bytes.NewReader(long)); err == nil {
		t.Errorf("RecordingEnd of a %d-byte last line: no error", len(long))
	}
}

// FuzzRecordingEnd: the end is 0 or just after a "\n", and no "\n"
// follows it.
func FuzzRecordingEnd(f *testing.F) {
	for _, tc := range recordingEndCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, err := RecordingEnd(bytes.NewReader(b))
		if err != nil {
			return
		}
		if end < 0 || end > int64(len(b)) || end > 0 && b[end-1] != '\n' || bytes.IndexByte(b[end:], '\n') >= 0 {
			t.Fatalf("RecordingEnd(%q) = %d", b, end)
		}
	})
}

var cursorCases = []struct {
	in   string
	want bool
}{
	{"20261207T150405Z 000001 shell-20261207T150405Z", true},
	{"20261207T150405Z 000012 shell-20261207T150405Z-12", true},
	{"00010101T000000Z 000001 a.b_c-20261207T150405Z", true},
	{"20261207T150405Z 1234567 x-20261207T150405Z-1234567", true},
	{"", false},
	{"shell-20261207T150405Z", false},
	{"20261207T150405Z 000001 ", false},
	{"20261207T150405Z 01 shell-20261207T150405Z", false},
	{"20261207T150405Z 000001 ../admin.token", false},
	{"20261207T150405Z 000001 a b", false},
	{"20261207T150405Z 000001 a\n", false},
	{"20261207T150405Z 000001 " + strings.Repeat("a", MaxRecordingCursor), false},
}

// TestValidRecordingCursor: a cursor is a recording's Key, of at most
// MaxRecordingCursor bytes.
func TestValidRecordingCursor(t *testing.T) {
	for _, tc := range cursorCases {
		if got := ValidRecordingCursor(tc.in); got != tc.want {
			t.Errorf("ValidRecordingCursor(%.60q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzValidRecordingCursor: a cursor accepted is bounded and printable
// ASCII with exactly two spaces.
func FuzzValidRecordingCursor(f *testing.F) {
	for _, tc := range cursorCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidRecordingCursor(s) {
			return
		}
		if len(s) > MaxRecordingCursor || strings.Count(s, " ") != 2 {
			t.Fatalf("ValidRecordingCursor(%q) = true", s)
		}
		for i := range len(s) {
			if s[i] < ' ' || s[i] > '~' {
				t.Fatalf("ValidRecordingCursor(%q) = true", s)
			}
		}
	})
}

var screenCutCases = []struct {
	s       string
	from, n int
	want    int
}{
	{"", 0, 10, 0},
	{"abc", 0, 10, 3},
	{"abc", 1, 1, 2},
	{"é漢🙂", 0, 1, 0}, // shorter than the first character
	{"é漢🙂", 0, 2, 2},
	{"é漢🙂", 0, 4, 2},
	{"é漢🙂", 0, 5, 5},
	{"é漢🙂", 2, 6, 5},
	{"é漢🙂", 5, 4, 9},
	{"é漢🙂", 5, -1, 5},
}

// TestScreenCut: a keyframe's piece ends at a character's boundary,
// within n bytes.
func TestScreenCut(t *testing.T) {
	for _, tc := range screenCutCases {
		if got := screenCut(tc.s, tc.from, tc.n); got != tc.want {
			t.Errorf("screenCut(%q, %d, %d) = %d, want %d", tc.s, tc.from, tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		s    string
		i    int
		want bool
	}{{"é", 0, true}, {"é", 1, false}, {"é", 2, true}, {"é", 3, false}, {"é", -1, false}} {
		if got := screenBoundary(tc.s, tc.i); got != tc.want {
			t.Errorf("screenBoundary(%q, %d) = %v, want %v", tc.s, tc.i, got, tc.want)
		}
	}
}

// FuzzScreenCut: pieces cut one after another from 0 at any sizes cover
// the screen exactly, each ending at a character's boundary (a valid
// UTF-8 screen stays valid in every piece).
func FuzzScreenCut(f *testing.F) {
	for _, tc := range screenCutCases {
		f.Add(tc.s, tc.n)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = 1 + abs(n)%16
		var b strings.Builder
		for from := 0; from < len(s); {
			end := screenCut(s, from, n)
			if end < from || end > from+n || end > from && !screenBoundary(s, end) {
				t.Fatalf("screenCut(%q, %d, %d) = %d", s, from, n, end)
			}
			if end == from {
				end = screenCut(s, from, utf8.UTFMax) // a character longer than n
				if end == from {
					end = from + 1 // not UTF-8: a byte
				}
			}
			if utf8.ValidString(s) && !utf8.ValidString(s[from:end]) {
				t.Fatalf("piece %q of %q is not UTF-8", s[from:end], s)
			}
			b.WriteString(s[from:end])
			from = end
		}
		if b.String() != s {
			t.Fatalf("pieces of %q make %q", s, b.String())
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
