package telemetry

import (
	"io"

	"github.com/ahp-dev/ahpd/internal/samples"
)

// The line formats of command sources and `ahpctl telemetry push`
// (PROTOCOL.md §10) are package samples', which the CLI shares:
//
//	name value [label=value ...]
//	{"name":"…","value":…,"t":…,"labels":{"k":"v"}}
//
// See samples.ParseLine.

// MaxLineBytes bounds one input line (without its newline).
const MaxLineBytes = samples.MaxLineBytes

// ErrLineTooLong is returned by LineReader.Next for a line longer than
// MaxLineBytes; the line is skipped whole.
var ErrLineTooLong = samples.ErrLineTooLong

// ParseLine parses one line (samples.ParseLine). now is the T given to a
// sample that has none. ok is false, with a nil error, for a blank or
// comment line. An error says what is wrong with the line; the sample is
// valid otherwise (Normalize has been applied).
func ParseLine(line []byte, now float64) (s Sample, ok bool, err error) {
	ps, ok, err := samples.ParseLine(line, now)
	if !ok {
		return Sample{}, ok, err
	}
	return fromShared(ps), true, nil
}

// fromShared converts a sample of package samples. The two types are the
// same struct: telemetry keeps its own (with the channel's methods) and
// checks with the same rules (TestSharedBounds, TestNormalizeAgrees).
func fromShared(ps samples.Sample) Sample {
	s := Sample{T: ps.T, Name: ps.Name, Value: ps.Value}
	if len(ps.Labels) > 0 {
		s.Labels = make([]Label, len(ps.Labels))
		for i, l := range ps.Labels {
			s.Labels[i] = Label{l.Name, l.Value}
		}
	}
	return s
}

func toShared(s Sample) samples.Sample {
	ps := samples.Sample{T: s.T, Name: s.Name, Value: s.Value}
	if len(s.Labels) > 0 {
		ps.Labels = make([]samples.Label, len(s.Labels))
		for i, l := range s.Labels {
			ps.Labels[i] = samples.Label{Name: l.Name, Value: l.Value}
		}
	}
	return ps
}

// FormatLine writes s in the first line format (without a newline); the
// time is not written. ParseLine reads it back to s with T = now.
func FormatLine(s Sample) string { return samples.FormatLine(toShared(s)) }

// LineReader reads lines of at most MaxLineBytes, counting them
// (samples.LineReader).
type LineReader = samples.LineReader

// NewLineReader reads r.
func NewLineReader(r io.Reader) *LineReader { return samples.NewLineReader(r) }
