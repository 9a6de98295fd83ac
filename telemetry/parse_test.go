package telemetry_test

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/internal/samples"
	"github.com/ahp-dev/ahpd/telemetry"
)

// The line parser is package samples' (its tests and fuzz targets are
// there); telemetry wraps it. These check the wrapper, and that
// telemetry's own checks (Sample.Normalize, which the daemon applies to
// pushed samples) agree with samples' (which ahpctl telemetry push
// applies before sending): a line the CLI accepts must not end the
// daemon's stream.

var parseCases = []struct {
	line string
	want telemetry.Sample
	skip bool
	err  string
}{
	{line: "cpu 0.5", want: telemetry.Sample{T: 7, Name: "cpu", Value: 0.5}},
	{line: `temp -1.5e3 room="living room" a=1`, want: telemetry.Sample{T: 7, Name: "temp", Value: -1500, Labels: []telemetry.Label{{Name: "a", Value: "1"}, {Name: "room", Value: "living room"}}}},
	{line: `{"t":5,"name":"x","value":3,"labels":{"k":"v"}}`, want: telemetry.Sample{T: 5, Name: "x", Value: 3, Labels: []telemetry.Label{{Name: "k", Value: "v"}}}},
	{line: ` {"name":"x","value":3,"labels":null}`, want: telemetry.Sample{T: 7, Name: "x", Value: 3}},
	{line: "# comment", skip: true},
	{line: "cpu one", err: "not a finite number"},
	// A label name given twice, in either format, and a member given
	// twice (which decoding merged, the later winning).
	{line: "cpu 1 a=1 b=2 a=3", err: "label a appears twice"},
	{line: `{"name":"x","value":1,"labels":{"a":"1","b":"2","a":"3"}}`, err: `label "a" appears twice`},
	{line: `{"name":"x","value":1,"labels":{"a":"1"},"labels":{"b":"2"}}`, err: `member "labels" appears twice`},
	{line: `{"name":"x","value":1,"Value":2}`, err: `member "Value" appears twice`},
}

func TestParseLineWraps(t *testing.T) {
	for _, tc := range parseCases {
		s, ok, err := telemetry.ParseLine([]byte(tc.line), 7)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || ok {
				t.Errorf("ParseLine(%q) = %v, %v; want an error with %q", tc.line, ok, err, tc.err)
			}
		case err != nil || ok == tc.skip:
			t.Errorf("ParseLine(%q) = %v, %v", tc.line, ok, err)
		case ok && !reflect.DeepEqual(s, tc.want):
			t.Errorf("ParseLine(%q) = %+v, want %+v", tc.line, s, tc.want)
		}
		if ok {
			if back, _, err := telemetry.ParseLine([]byte(telemetry.FormatLine(s)), s.T); err != nil || !reflect.DeepEqual(back, s) {
				t.Errorf("FormatLine(%+v) reads back as %+v, %v", s, back, err)
			}
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

// FuzzParseLine: telemetry's ParseLine never panics, accepts only what
// samples.ParseLine accepts (the same sample), and what it accepts reads
// back through FormatLine. Its corpus (testdata/fuzz) holds lines with a
// label or a member given twice.
func FuzzParseLine(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, ok, err := telemetry.ParseLine([]byte(line), 7)
		ps, pok, perr := samples.ParseLine([]byte(line), 7)
		if err == nil && (perr != nil || ok != pok || !reflect.DeepEqual(s, ps)) {
			t.Fatalf("ParseLine(%q) = %+v, %v, %v; samples.ParseLine: %+v, %v, %v", line, s, ok, err, ps, pok, perr)
		}
		if err != nil || !ok {
			return
		}
		if back, ok, err := telemetry.ParseLine([]byte(telemetry.FormatLine(s)), s.T); err != nil || !ok || !reflect.DeepEqual(back, s) {
			t.Fatalf("FormatLine(%+v) reads back as %+v, %v, %v", s, back, ok, err)
		}
	})
}
