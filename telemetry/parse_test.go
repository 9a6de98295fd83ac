package telemetry_test

import (
	"errors"
	"io"
	"math"
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

func TestParseLineWraps(t *testing.T) {
	for _, tc := range []struct {
		line string
		want telemetry.Sample
		skip bool
		err  string
	}{
		{line: "cpu 0.5", want: telemetry.Sample{T: 7, Name: "cpu", Value: 0.5}},
		{line: `temp -1.5e3 room="living room" a=1`, want: telemetry.Sample{T: 7, Name: "temp", Value: -1500, Labels: []telemetry.Label{{"a", "1"}, {"room", "living room"}}}},
		{line: `{"t":5,"name":"x","value":3,"labels":{"k":"v"}}`, want: telemetry.Sample{T: 5, Name: "x", Value: 3, Labels: []telemetry.Label{{"k", "v"}}}},
		{line: "# comment", skip: true},
		{line: "cpu one", err: "not a finite number"},
	} {
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

func TestSharedBounds(t *testing.T) {
	for _, b := range [][2]int{
		{telemetry.MaxNameBytes, samples.MaxNameBytes}, {telemetry.MaxLabels, samples.MaxLabels},
		{telemetry.MaxLabelNameBytes, samples.MaxLabelNameBytes}, {telemetry.MaxLabelValueBytes, samples.MaxLabelValueBytes},
		{telemetry.MaxSampleBytes, samples.MaxSampleBytes}, {telemetry.MaxLineBytes, samples.MaxLineBytes},
	} {
		if b[0] != b[1] {
			t.Errorf("bound %d in telemetry, %d in samples", b[0], b[1])
		}
	}
}

// normalizeCases are samples near every bound of Normalize.
func normalizeCases() []telemetry.Sample {
	long := func(n int) string { return strings.Repeat("a", n) }
	labels := func(n int) []telemetry.Label {
		var ls []telemetry.Label
		for i := range n {
			ls = append(ls, telemetry.Label{Name: "l" + long(i), Value: "v"})
		}
		return ls
	}
	return []telemetry.Sample{
		{Name: "ok", Value: 1},
		{Name: long(200), Value: 1}, {Name: long(201), Value: 1},
		{Name: "9x", Value: 1}, {Name: "a.b:c_9", Value: 1}, {Name: "", Value: 1},
		{Name: "x", T: -1}, {Name: "x", T: math.Inf(1)}, {Name: "x", Value: math.NaN()},
		{Name: "x", Labels: labels(16)}, {Name: "x", Labels: labels(17)},
		{Name: "x", Labels: []telemetry.Label{{long(100), "v"}}}, {Name: "x", Labels: []telemetry.Label{{long(101), "v"}}},
		{Name: "x", Labels: []telemetry.Label{{"k", long(256)}}}, {Name: "x", Labels: []telemetry.Label{{"k", long(257)}}},
		{Name: "x", Labels: []telemetry.Label{{"k", "\xff"}}}, {Name: "x", Labels: []telemetry.Label{{"b", "1"}, {"a", "2"}, {"b", "3"}}},
		{Name: "x", Labels: []telemetry.Label{{"9", "1"}}},
		// The encoded size: 16 labels of 100-byte names and 8 escaped
		// 256-byte values pass 2 KiB.
		{Name: long(200), Labels: func() []telemetry.Label {
			var ls []telemetry.Label
			for i := range 16 {
				ls = append(ls, telemetry.Label{Name: string(rune('a'+i)) + long(99), Value: strings.Repeat("\"", 100)})
			}
			return ls
		}()},
	}
}

func TestNormalizeAgrees(t *testing.T) {
	for _, s := range normalizeCases() {
		ps := samples.Sample{T: s.T, Name: s.Name, Value: s.Value}
		for _, l := range s.Labels {
			ps.Labels = append(ps.Labels, samples.Label{Name: l.Name, Value: l.Value})
		}
		terr, serr := s.Normalize(), ps.Normalize()
		if (terr == nil) != (serr == nil) || terr != nil && terr.Error() != serr.Error() {
			t.Errorf("Normalize(%.60q…): telemetry %v, samples %v", s.Name, terr, serr)
		}
		if terr != nil && (!errors.Is(terr, telemetry.ErrInvalidSample) || !errors.Is(serr, samples.ErrInvalidSample)) {
			t.Errorf("Normalize(%.60q…): errors %v, %v do not wrap ErrInvalidSample", s.Name, terr, serr)
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
