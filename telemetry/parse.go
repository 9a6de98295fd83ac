package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

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
//
// A label name given twice is refused in both formats: samples.ParseLine
// refuses it in a text line, and ParseLine in a JSON line too, whose
// decoding into a map kept the later value silently (as it does a member
// given twice, which is refused as well).
func ParseLine(line []byte, now float64) (s Sample, ok bool, err error) {
	s, ok, err = samples.ParseLine(line, now)
	if ok {
		if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] == '{' {
			if err := jsonDuplicates(t); err != nil {
				return Sample{}, false, err
			}
		}
	}
	return s, ok, err
}

// jsonDuplicates returns an error if the JSON object line, which
// samples.ParseLine accepted (so its members are the four known, and its
// labels at most MaxLabels names of strings), has a member or a label
// name twice. Members are matched as encoding/json matches them to
// fields, without regard to case.
func jsonDuplicates(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var members []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		m, _ := t.(string)
		for _, seen := range members {
			if strings.EqualFold(seen, m) {
				return fmt.Errorf("JSON: member %s appears twice", strconv.Quote(m))
			}
		}
		members = append(members, m)
		if !strings.EqualFold(m, "labels") {
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			continue // null: no labels
		}
		var names []string
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return nil
			}
			k, _ := t.(string)
			if slices.Contains(names, k) {
				return fmt.Errorf("label %s appears twice", strconv.Quote(k))
			}
			names = append(names, k)
			if _, err := dec.Token(); err != nil { // its value: a string
				return nil
			}
		}
		if _, err := dec.Token(); err != nil { // }
			return nil
		}
	}
	return nil
}

// FormatLine writes s in the text line format (samples.FormatLine).
func FormatLine(s Sample) string { return samples.FormatLine(s) }

// LineReader reads lines of at most MaxLineBytes, counting them
// (samples.LineReader).
type LineReader = samples.LineReader

// NewLineReader reads r.
func NewLineReader(r io.Reader) *LineReader { return samples.NewLineReader(r) }
