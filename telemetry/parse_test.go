package telemetry_test

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/telemetry"
)

var parseCases = []struct {
	line string
	want telemetry.Sample
	skip bool
	err  string // a substring of the error
}{
	{line: "cpu 0.5", want: telemetry.Sample{T: 7, Name: "cpu", Value: 0.5}},
	{line: "  http_requests:total  12  method=GET code=200 ", want: telemetry.Sample{T: 7, Name: "http_requests:total", Value: 12, Labels: []telemetry.Label{{"code", "200"}, {"method", "GET"}}}},
	{line: `temp -1.5e3 room="living room" note="say \"hi\""`, want: telemetry.Sample{T: 7, Name: "temp", Value: -1500, Labels: []telemetry.Label{{"note", `say "hi"`}, {"room", "living room"}}}},
	{line: "a.b 1\r", want: telemetry.Sample{T: 7, Name: "a.b", Value: 1}},
	{line: `{"name":"x","value":3}`, want: telemetry.Sample{T: 7, Name: "x", Value: 3}},
	{line: `{"t":1712000000000.5,"name":"x","value":-2,"labels":{"b":"2","a":"1"}}`, want: telemetry.Sample{T: 1712000000000.5, Name: "x", Value: -2, Labels: []telemetry.Label{{"a", "1"}, {"b", "2"}}}},
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
		s, ok, err := telemetry.ParseLine([]byte(tc.line), 7)
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
	in := "a 1\n" + strings.Repeat("x", telemetry.MaxLineBytes+10) + "\nb 2\nlast 3"
	lr := telemetry.NewLineReader(strings.NewReader(in))
	var got []string
	for range 10 {
		line, n, err := lr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, telemetry.ErrLineTooLong) {
			got = append(got, sprintf("%d:too long", n))
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, sprintf("%d:%s", n, line))
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
		s, ok, err := telemetry.ParseLine([]byte(line), 7)
		if err != nil || !ok {
			return
		}
		if err := s.Normalize(); err != nil {
			t.Fatalf("ParseLine(%q) accepted an invalid sample: %v", line, err)
		}
		text := telemetry.FormatLine(s)
		back, ok, err := telemetry.ParseLine([]byte(text), s.T)
		if err != nil || !ok {
			t.Fatalf("FormatLine(%+v) = %q, which does not parse: %v", s, text, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip of %q: %+v, then %q → %+v", line, s, text, back)
		}
	})
}
