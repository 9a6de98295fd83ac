package samples

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The line formats of command sources and `ahpctl telemetry push`
// (PROTOCOL.md §10):
//
//	name value [label=value ...]
//	{"name":"…","value":…,"t":…,"labels":{"k":"v"}}
//
// In the first, fields are separated by spaces or tabs; a label value may
// be written as a Go-style double-quoted string ("a b", "\"x\"") to hold
// spaces or quotes. A line is blank or a comment (starting with #) is
// skipped. In the second, t (Unix ms) and labels are optional; no other
// member is allowed. Without t, the sample is stamped with the time the
// line was read.

// MaxLineBytes bounds one input line (without its newline).
const MaxLineBytes = 16 << 10

// ErrLineTooLong is returned by LineReader.Next for a line longer than
// MaxLineBytes; the line is skipped whole.
var ErrLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLineBytes)

// ParseLine parses one line. now is the T given to a sample that has
// none. ok is false, with a nil error, for a blank or comment line. An
// error says what is wrong with the line; the sample is valid otherwise
// (Normalize has been applied).
func ParseLine(line []byte, now float64) (s Sample, ok bool, err error) {
	line = bytes.TrimRight(line, "\r")
	trimmed := bytes.TrimLeft(line, " \t")
	switch {
	case len(line) > MaxLineBytes:
		return Sample{}, false, ErrLineTooLong
	case len(trimmed) == 0 || trimmed[0] == '#':
		return Sample{}, false, nil
	case !utf8.Valid(trimmed):
		return Sample{}, false, errors.New("line is not valid UTF-8")
	case trimmed[0] == '{':
		s, err = parseJSONLine(trimmed, now)
	default:
		s, err = parseTextLine(string(trimmed), now)
	}
	if err != nil {
		return Sample{}, false, err
	}
	if err := s.Normalize(); err != nil {
		return Sample{}, false, err
	}
	return s, true, nil
}

type jsonSample struct {
	T      *float64           `json:"t"`
	Name   *string            `json:"name"`
	Value  *float64           `json:"value"`
	Labels map[string]*string `json:"labels"`
}

func parseJSONLine(line []byte, now float64) (Sample, error) {
	var j jsonSample
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Sample{}, fmt.Errorf("JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Sample{}, errors.New("JSON: text after the object")
	}
	switch {
	case j.Name == nil:
		return Sample{}, errors.New(`JSON: "name" is required`)
	case j.Value == nil:
		return Sample{}, errors.New(`JSON: "value" is required (a number)`)
	case len(j.Labels) > MaxLabels:
		return Sample{}, fmt.Errorf("%d labels, more than %d", len(j.Labels), MaxLabels)
	}
	if err := jsonDuplicates(line); err != nil {
		return Sample{}, err
	}
	s := Sample{T: now, Name: *j.Name, Value: *j.Value}
	if j.T != nil {
		s.T = *j.T
	}
	for k, v := range j.Labels {
		if v == nil {
			return Sample{}, fmt.Errorf("label %s: value must be a string, got null", strconv.Quote(k))
		}
		s.Labels = append(s.Labels, Label{Name: k, Value: *v})
	}
	return s, nil
}

func parseTextLine(line string, now float64) (Sample, error) {
	name, rest := cutField(line)
	valueText, rest := cutField(rest)
	if valueText == "" {
		return Sample{}, fmt.Errorf("%s: want \"name value [label=value ...]\", the value is missing", strconv.Quote(name))
	}
	v, err := strconv.ParseFloat(valueText, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return Sample{}, fmt.Errorf("%s: value %s is not a finite number", strconv.Quote(name), strconv.Quote(valueText))
	}
	s := Sample{T: now, Name: name, Value: v}
	for rest = trimSpace(rest); rest != ""; rest = trimSpace(rest) {
		if len(s.Labels) == MaxLabels {
			return Sample{}, fmt.Errorf("%s: more than %d labels", name, MaxLabels)
		}
		eq := strings.IndexByte(rest, '=')
		if sp := strings.IndexAny(rest, " \t"); eq < 0 || sp >= 0 && sp < eq {
			f, _ := cutField(rest)
			return Sample{}, fmt.Errorf("%s: label %s: want name=value", name, strconv.Quote(f))
		}
		k := rest[:eq]
		rest = rest[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return Sample{}, fmt.Errorf("%s: label %s: bad quoted value", name, k)
			}
			val, _ = strconv.Unquote(q)
			rest = rest[len(q):]
			if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
				return Sample{}, fmt.Errorf("%s: label %s: text after the quoted value", name, k)
			}
		} else {
			val, rest = cutField(rest)
		}
		s.Labels = append(s.Labels, Label{Name: k, Value: val})
	}
	return s, nil
}

func trimSpace(s string) string { return strings.TrimLeft(s, " \t") }

// cutField returns the first space-separated field of s and what follows.
func cutField(s string) (field, rest string) {
	s = trimSpace(s)
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], s[i:]
	}
	return s, ""
}

// FormatLine writes s in the first line format (without a newline); the
// time is not written. ParseLine reads it back to s with T = now.
func FormatLine(s Sample) string {
	b := []byte(s.Name)
	b = append(b, ' ')
	b = strconv.AppendFloat(b, s.Value, 'g', -1, 64)
	for _, l := range s.Labels {
		b = append(b, ' ')
		b = append(b, l.Name...)
		b = append(b, '=')
		if l.Value == "" || strings.ContainsAny(l.Value, " \t\"\\") || !strconv.CanBackquote(l.Value) {
			b = strconv.AppendQuote(b, l.Value)
		} else {
			b = append(b, l.Value...)
		}
	}
	return string(b)
}

// LineReader reads lines of at most MaxLineBytes, counting them. It never
// holds more than one line and its buffer. A read error other than EOF
// (a deadline that stopped it) leaves the line it was reading where it
// was: the next Next goes on with it, and Held hands it to a reader of
// the same input in another process (ResumeLineReader).
type LineReader struct {
	r       *bufio.Reader
	n       int
	line    []byte
	cont    bool // the last Next ended in a read error: line goes on
	tooLong bool // the line being read is too long and skipped
}

// NewLineReader reads r.
func NewLineReader(r io.Reader) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ResumeLineReader reads, as the reader that returned held, skipping and
// n from Held would have: held first, then r.
func ResumeLineReader(r io.Reader, held []byte, skipping bool, n int) *LineReader {
	if len(held) > 0 {
		r = io.MultiReader(bytes.NewReader(held), r)
	}
	l := NewLineReader(r)
	l.n, l.cont, l.tooLong = n, skipping, skipping
	return l
}

// Next returns the next line (without its newline; valid until the next
// call) and its number, counting from 1. A line longer than MaxLineBytes
// is skipped to its end and reported as ErrLineTooLong with its number.
// At the end of the input it returns io.EOF (a last line without a
// newline is returned first).
func (l *LineReader) Next() ([]byte, int, error) {
	if !l.cont {
		l.line = l.line[:0]
		l.tooLong = false
	}
	l.cont = false
	for {
		chunk, err := l.r.ReadSlice('\n')
		if !l.tooLong {
			if len(l.line)+len(chunk) > MaxLineBytes+2 { // room for "\r\n"
				l.tooLong = true
				l.line = l.line[:0]
			} else {
				l.line = append(l.line, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(l.line) == 0 && !l.tooLong:
			return nil, l.n, io.EOF
		case err != nil && err != io.EOF:
			l.cont = true
			return nil, l.n, err
		}
		l.n++
		if l.tooLong {
			return nil, l.n, ErrLineTooLong
		}
		return bytes.TrimSuffix(l.line, []byte("\n")), l.n, nil
	}
}

// Held returns what the reader took from its input and has not returned
// as a line: the start of the line a read error cut short (empty when
// that line is too long: skipping is then true), then what it buffered;
// and the number of the last line returned. ResumeLineReader carries on
// from them.
func (l *LineReader) Held() (held []byte, skipping bool, n int) {
	if l.cont {
		held = append(held, l.line...)
		skipping = l.tooLong
	}
	b, _ := l.r.Peek(l.r.Buffered())
	return append(held, b...), skipping, l.n
}

// Buffered reports whether the next line is already in memory, whole (a
// reader flushes its batch when it is not: the start of a line does not
// hold back the lines before it).
func (l *LineReader) Buffered() bool {
	b, _ := l.r.Peek(l.r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// jsonDuplicates returns an error if the JSON object line, which
// parseJSONLine decoded (so its members are the four known, and its
// labels at most MaxLabels names of strings), has a member or a label
// name twice: decoding into a map keeps the later value silently. Members are matched as encoding/json matches them to
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
