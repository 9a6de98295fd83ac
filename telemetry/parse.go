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
// valid otherwise (Normalize has been applied). A label name or a JSON
// member given twice is refused.
func ParseLine(line []byte, now float64) (s Sample, ok bool, err error) {
	return samples.ParseLine(line, now)
}

// FormatLine writes s in the text line format (samples.FormatLine).
func FormatLine(s Sample) string { return samples.FormatLine(s) }

// LineReader reads lines of at most MaxLineBytes, counting them
// (samples.LineReader).
type LineReader = samples.LineReader

// NewLineReader reads r.
func NewLineReader(r io.Reader) *LineReader { return samples.NewLineReader(r) }

// ResumeLineReader reads r as the reader whose Held returned held,
// skipping and n would have (samples.ResumeLineReader).
func ResumeLineReader(r io.Reader, held []byte, skipping bool, n int) *LineReader {
	return samples.ResumeLineReader(r, held, skipping, n)
}
