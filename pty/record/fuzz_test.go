package record

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// castSeeds are .cast files: ours, asciinema's, and broken ones.
var castSeeds = []string{
	"{\"version\":2,\"width\":80,\"height\":24,\"timestamp\":1765000000,\"title\":\"sh\",\"env\":{\"TERM\":\"xterm-256color\"}}\n" +
		"[0.001000,\"o\",\"hello \\u001b[1mworld\\r\\n\"]\n[0.5,\"i\",\"ls\\r\"]\n[1,\"r\",\"100x30\"]\n[2.000001,\"m\",\"recording stopped: x\"]\n",
	"{\"version\": 2, \"width\": 3, \"height\": 1}\n[0.0, \"o\", \"\\ud83d\\ude42\"]\n\n",
	"{\"version\":1,\"width\":80,\"height\":24}\n",
	"{\"version\":2,\"width\":0,\"height\":24}\n",
	"{\"version\":2,\"width\":80,\"height\":24}\n[1,\"o\"]\n",
	"{\"version\":2,\"width\":80,\"height\":24}\n[-1,\"o\",\"x\"]\n",
	"{\"version\":2,\"width\":80,\"height\":24}\n[1,\"o\",\"partial",
	"[1,\"o\",\"x\"]\n",
	"",
}

// FuzzCast: the reader never panics or hangs on any input; every event it
// accepts, written as a Recorder writes it, reads back the same (its time
// to the microsecond).
func FuzzCast(f *testing.F) {
	for _, s := range castSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("header error %v does not wrap ErrFormat", err)
			}
			return
		}
		h := r.Header()
		h2, err := ParseHeader(appendHeader(nil, h))
		if err != nil || h2.Width != h.Width || h2.Height != h.Height || h2.Title != h.Title {
			t.Fatalf("header %+v re-read as %+v, %v", h, h2, err)
		}
		for e, err := range r.Events() {
			if err != nil {
				return
			}
			if len(e.Type) != 1 || e.Time > 1e9 {
				continue
			}
			d := time.Duration(e.Time*1e6) * time.Microsecond
			line := appendEvents(nil, d, e.Type[0], e.Data)
			var got strings.Builder
			for _, l := range bytes.SplitAfter(line, []byte("\n")) {
				if len(l) == 0 {
					continue
				}
				if len(l) > MaxEventLine {
					t.Fatalf("line of %d bytes", len(l))
				}
				e2, err := ParseEvent(l)
				if err != nil {
					t.Fatalf("our line %q: %v", l, err)
				}
				if e2.Type != e.Type || e2.Time != float64(d.Microseconds())/1e6 {
					t.Fatalf("event %+v re-read as %+v", e, e2)
				}
				got.WriteString(e2.Data)
			}
			if got.String() != e.Data {
				t.Fatalf("data %q re-read as %q", e.Data, got.String())
			}
		}
	})
}

var indexSeeds = []string{
	"{\"type\":\"keyframe\",\"time\":0.000000,\"offset\":120,\"rows\":24,\"cols\":80,\"screen\":\"\\u001b[Hhi\"}\n" +
		"{\"type\":\"audit\",\"time\":0.000000,\"event\":\"record-on\",\"detail\":\"output\"}\n" +
		"{\"type\":\"audit\",\"time\":1.5,\"event\":\"attach\",\"viewer\":\"v\",\"token\":\"t1\",\"role\":\"view\",\"remote\":\"[::1]:5\"}\n" +
		"{\"type\":\"dropped\",\"time\":2,\"bytes\":4096}\n",
	"{\"type\":\"keyframe\",\"time\":1,\"offset\":-1,\"rows\":24,\"cols\":80}\n",
	"{\"type\":\"keyframe\",\"time\":1,\"offset\":1,\"rows\":0,\"cols\":80}\n",
	"{\"type\":\"audit\",\"time\":1}\n",
	"{\"type\":\"other\",\"time\":1}\n",
	"{\"type\":\"dropped\",\"bytes\":1}\n",
	"{\"type\":\"dropped\",\"time\":1,\"bytes\":1}",
	"not json\n",
}

// FuzzIndex: ReadIndex and ParseIndexLine never panic on any input; a
// line they accept, written as a Recorder writes it, parses the same.
func FuzzIndex(f *testing.F) {
	for _, s := range indexSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ReadIndex(bytes.NewReader(data), true); err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("ReadIndex error %v does not wrap ErrFormat", err)
		}
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			l, err := ParseIndexLine(line)
			if err != nil || l.Time > 1e9 {
				continue
			}
			d := time.Duration(l.Time*1e6) * time.Microsecond
			var again []byte
			switch l.Type {
			case "keyframe":
				k := l.Keyframe
				again = keyframeLine(d, k.Offset, k.Rows, k.Cols, k.Screen)
			case "audit":
				a := l.Audit
				a.Time = float64(d.Microseconds()) / 1e6
				again = appendAudit(nil, a)
			case "dropped":
				again = appendDropped(nil, d, l.Dropped, l.DroppedAudit)
			}
			l2, err := ParseIndexLine(again)
			if err != nil {
				t.Fatalf("our line %q: %v", again, err)
			}
			l.Time = float64(d.Microseconds()) / 1e6
			if l.Type == "keyframe" {
				l.Keyframe.Time = l.Time
			}
			if l.Type == "audit" {
				l.Audit.Time = l.Time
			}
			if l2 != l {
				t.Fatalf("line %q re-read as\n%+v, want\n%+v", again, l2, l)
			}
		}
	})
}
