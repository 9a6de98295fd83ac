package samples_test

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/internal/samples"
)

var parseCases = []struct {
	line string
	want samples.Sample
	skip bool
	err  string // a substring of the error
}{
	{line: "cpu 0.5", want: samples.Sample{T: 7, Name: "cpu", Value: 0.5}},
	{line: "  http_requests:total  12  method=GET code=200 ", want: samples.Sample{T: 7, Name: "http_requests:total", Value: 12, Labels: []samples.Label{{"code", "200"}, {"method", "GET"}}}},
	{line: `temp -1.5e3 room="living room" note="say \"hi\""`, want: samples.Sample{T: 7, Name: "temp", Value: -1500, Labels: []samples.Label{{"note", `say "hi"`}, {"room", "living room"}}}},
	{line: "a.b 1\r", want: samples.Sample{T: 7, Name: "a.b", Value: 1}},
	{line: `{"name":"x","value":3}`, want: samples.Sample{T: 7, Name: "x", Value: 3}},
	{line: `{"t":1712000000000.5,"name":"x","value":-2,"labels":{"b":"2","a":"1"}}`, want: samples.Sample{T: 1712000000000.5, Name: "x", Value: -2, Labels: []samples.Label{{"a", "1"}, {"b", "2"}}}},
	{line: "", skip: true},
	{line: "   # a comment", skip: true},
	{line: "cpu", err: "value is missing"},
	{line: "9cpu 1", err: "must match"},
	{line: "cpu one", err: "not a finite number"},
	{line: "cpu NaN", err: "not a finite number"},
	{line: "cpu +Inf", err: "not a finite number"},
	{line: "cpu 1 host", err: "want name=value"},
	{line: "cpu 1 9h=x", err: "label name"},
	{line: "cpu 1 a=1 a=2", err: "appears twice"},
	{line: `{"name":"cpu","value":1,"labels":{"a":"1","a":"2"}}`, err: `label "a" appears twice`},
	{line: `{"name":"cpu","value":1,"value":2}`, err: `member "value" appears twice`},
	{line: `cpu 1 a="x`, err: "bad quoted value"},
	{line: `cpu 1 a="x"y`, err: "text after the quoted value"},
	{line: `{"name":"x"}`, err: `"value" is required`},
	{line: `{"value":1}`, err: `"name" is required`},
	{line: `{"name":"x","value":"1"}`, err: "JSON"},
	{line: `{"name":"x","value":1,"extra":1}`, err: "unknown field"},
	{line: `{"name":"x","value":1} {}`, err: "text after the object"},
	{line: `{"name":"x","value":1,"labels":{"a":null}}`, err: "must be a string"},
	{line: `{"name":"x","value":1,"t":-5}`, err: "non-negative"},
	{line: "x 1 " + strings.Repeat("a=b ", 1)[:0] + strings.Repeat("k", 101) + "=v", err: "longer than 100"},
	{line: "x 1 k=" + strings.Repeat("v", 300), err: "longer than 256"},
	{line: "x\xff 1", err: "UTF-8"},
}

func TestParseLine(t *testing.T) {
	for _, tc := range parseCases {
		s, ok, err := samples.ParseLine([]byte(tc.line), 7)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseLine(%q) = %v, want an error with %q", tc.line, err, tc.err)
			}
		case err != nil:
			t.Errorf("ParseLine(%q): %v", tc.line, err)
		case ok == tc.skip:
			t.Errorf("ParseLine(%q): ok %v, want %v", tc.line, ok, !tc.skip)
		case ok && !reflect.DeepEqual(s, tc.want):
			t.Errorf("ParseLine(%q) = %+v, want %+v", tc.line, s, tc.want)
		}
	}
}

func TestLineReader(t *testing.T) {
	in := "a 1\n" + strings.Repeat("x", samples.MaxLineBytes+10) + "\nb 2\nlast 3"
	lr := samples.NewLineReader(strings.NewReader(in))
	var got []string
	for range 10 {
		line, n, err := lr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, samples.ErrLineTooLong) {
			got = append(got, fmt.Sprintf("%d:too long", n))
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s", n, line))
	}
	want := []string{"1:a 1", "2:too long", "3:b 2", "4:last 3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzParseLine: ParseLine never panics; a sample it accepts is valid,
// and its FormatLine reads back to the same sample.
func FuzzParseLine(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, ok, err := samples.ParseLine([]byte(line), 7)
		if err != nil || !ok {
			return
		}
		if err := s.Normalize(); err != nil {
			t.Fatalf("ParseLine(%q) accepted an invalid sample: %v", line, err)
		}
		text := samples.FormatLine(s)
		back, ok, err := samples.ParseLine([]byte(text), s.T)
		if err != nil || !ok {
			t.Fatalf("FormatLine(%+v) = %q, which does not parse: %v", s, text, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip of %q: %+v, then %q → %+v", line, s, text, back)
		}
	})
}

// FuzzLineReader: LineReader never panics, numbers lines from 1 without
// gaps, returns lines without a newline and of at most MaxLineBytes
// (plus a trailing \r), and loses no line: the lines it returns and the
// ones it skips as too long are the input's.
func FuzzLineReader(f *testing.F) {
	f.Add("a 1\nb 2\n", 0)
	f.Add("a 1\r\nlast", 3)
	f.Add("\n\n\n", 1)
	f.Add(strings.Repeat("x", samples.MaxLineBytes+1)+"\nok 1", 7)
	f.Add(strings.Repeat("y", samples.MaxLineBytes)+"\r\n", 4096)
	f.Fuzz(func(t *testing.T, in string, pad int) {
		// pad grows the input past the reader's buffer now and then, and
		// sets the size of the reads.
		pad &= 1<<20 - 1
		if pad%3 == 0 {
			in = strings.Repeat("z", pad%(5*samples.MaxLineBytes)) + in
		}
		want := strings.Split(in, "\n")
		if strings.HasSuffix(in, "\n") || in == "" {
			want = want[:len(want)-1]
		}
		lr := samples.NewLineReader(&chunkReader{strings.NewReader(in), 1 + pad%5000})
		for i := 0; ; i++ {
			line, n, err := lr.Next()
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("EOF after %d lines, want %d", i, len(want))
				}
				return
			}
			if n != i+1 {
				t.Fatalf("line %d numbered %d", i+1, n)
			}
			if i >= len(want) {
				t.Fatalf("line %d beyond the input's %d", n, len(want))
			}
			switch {
			case errors.Is(err, samples.ErrLineTooLong):
				if len(strings.TrimSuffix(want[i], "\r")) <= samples.MaxLineBytes {
					t.Fatalf("line %d (%d bytes) reported too long", n, len(want[i]))
				}
			case err != nil:
				t.Fatal(err)
			case string(line) != want[i]:
				t.Fatalf("line %d = %q, want %q", n, line, want[i])
			}
		}
	})
}

// chunkReader reads at most n bytes at a time.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// stopReader returns the first n bytes of s, then errStop.
type stopReader struct {
	s string
	n int
}

var errStop = errors.New("stopped")

func (r *stopReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errStop
	}
	k := copy(p, r.s[:min(r.n, len(r.s))])
	r.s, r.n = r.s[k:], r.n-k
	return k, nil
}

// readAll reads lr to EOF or another error, as "n:line" or "n:too long".
func readAll(t *testing.T, lr *samples.LineReader) ([]string, error) {
	var got []string
	for range 100 {
		line, n, err := lr.Next()
		switch {
		case errors.Is(err, samples.ErrLineTooLong):
			got = append(got, fmt.Sprintf("%d:too long", n))
		case err != nil:
			return got, err
		default:
			got = append(got, fmt.Sprintf("%d:%s", n, line))
		}
	}
	t.Fatal("no end")
	return nil, nil
}

// TestLineReaderResume: a reader stopped by a read error anywhere in its
// input — within a line, within a line too long, between lines — hands
// what it holds (Held) to a reader of the rest (ResumeLineReader), and
// the two return the lines one reader returns, numbered alike: none lost,
// cut or twice.
func TestLineReaderResume(t *testing.T) {
	in := "a 1\n" + strings.Repeat("x", samples.MaxLineBytes+10) + "\nb 2\r\n\nlast 3"
	want, err := readAll(t, samples.NewLineReader(strings.NewReader(in)))
	if err != io.EOF {
		t.Fatal(err)
	}
	for _, at := range []int{0, 1, 3, 4, 5, 100, 4 + samples.MaxLineBytes + 9, 4 + samples.MaxLineBytes + 10, 4 + samples.MaxLineBytes + 11, len(in) - 3, len(in)} {
		first := samples.NewLineReader(&stopReader{in, at})
		got, err := readAll(t, first)
		if err != errStop {
			t.Fatalf("stopped at %d: %v, want errStop", at, err)
		}
		held, skipping, n := first.Held()
		rest, err := readAll(t, samples.ResumeLineReader(strings.NewReader(in[at:]), held, skipping, n))
		if err != io.EOF {
			t.Fatalf("resumed at %d: %v", at, err)
		}
		if got = append(got, rest...); !reflect.DeepEqual(got, want) {
			t.Errorf("stopped at %d (held %d bytes, skipping %v): got %q, want %q", at, len(held), skipping, got, want)
		}
	}
}

// TestLineReaderBuffered: Buffered says whether the next line is in
// memory whole; the start of a line is not (a command source would hold
// the samples before it back until the line ends).
func TestLineReaderBuffered(t *testing.T) {
	lr := samples.NewLineReader(&stopReader{"a 1\nb 2\nc", 100})
	for _, want := range []bool{true, false} {
		if _, _, err := lr.Next(); err != nil {
			t.Fatal(err)
		}
		if got := lr.Buffered(); got != want {
			t.Fatalf("Buffered() = %v, want %v", got, want)
		}
	}
}
