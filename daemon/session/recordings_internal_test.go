package session

import (
	"bytes"
	"testing"
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
