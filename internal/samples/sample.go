package samples

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
)

// Bounds of one sample (docs/protocol-decisions.md, "Telemetry channels").
// A sample that breaks one is refused with an error naming the bound.
const (
	MaxNameBytes       = 200  // a metric name
	MaxLabels          = 16   // labels of one sample
	MaxLabelNameBytes  = 100  // a label name
	MaxLabelValueBytes = 256  // a label value (valid UTF-8)
	MaxSampleBytes     = 2048 // one encoded sample, UTF-16 bytes (PROTOCOL.md §4 unit)
)

// Sample is one measurement (PROTOCOL.md §8): at T (Unix time in
// milliseconds), metric Name had Value. Labels are sorted by name and
// unique once the sample is valid (Normalize).
type Sample struct {
	T      float64
	Name   string
	Value  float64
	Labels []Label
}

// Label is one label of a sample.
type Label struct {
	Name, Value string
}

// UnixMilli returns t in the unit of Sample.T, keeping fractions.
func UnixMilli(sec int64, nsec int64) float64 {
	return float64(sec)*1000 + float64(nsec)/1e6
}

// ValidName reports whether name is a metric name of PROTOCOL.md §8:
// [a-zA-Z_:][a-zA-Z0-9_:.]*.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':':
		case i > 0 && (c >= '0' && c <= '9' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// validLabelName reports whether name is a Prometheus label name:
// [a-zA-Z_][a-zA-Z0-9_]*.
func validLabelName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

// ErrInvalidSample is wrapped by every error of Validate.
var ErrInvalidSample = errors.New("invalid sample")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSample, fmt.Sprintf(format, args...))
}

// Normalize sorts the labels by name and then checks the sample: a valid
// name, a finite value and time, label names and values within bounds and
// unique, and an encoding of at most MaxSampleBytes. The error wraps
// ErrInvalidSample and says what is wrong.
func (s *Sample) Normalize() error {
	if len(s.Labels) > 1 && !slices.IsSortedFunc(s.Labels, cmpLabel) {
		s.Labels = slices.Clone(s.Labels)
		slices.SortStableFunc(s.Labels, cmpLabel)
	}
	return s.validate()
}

func cmpLabel(a, b Label) int { return strings.Compare(a.Name, b.Name) }

func (s *Sample) validate() error {
	switch {
	case len(s.Name) > MaxNameBytes:
		return invalid("name: longer than %d bytes", MaxNameBytes)
	case !ValidName(s.Name):
		return invalid("name %s: must match [a-zA-Z_:][a-zA-Z0-9_:.]*", strconv.Quote(s.Name))
	case math.IsNaN(s.Value) || math.IsInf(s.Value, 0):
		return invalid("%s: value must be a finite number, got %v", s.Name, s.Value)
	case math.IsNaN(s.T) || math.IsInf(s.T, 0) || s.T < 0:
		return invalid("%s: t must be a finite, non-negative Unix time in ms, got %v", s.Name, s.T)
	case len(s.Labels) > MaxLabels:
		return invalid("%s: %d labels, more than %d", s.Name, len(s.Labels), MaxLabels)
	}
	for i, l := range s.Labels {
		switch {
		case len(l.Name) > MaxLabelNameBytes:
			return invalid("%s: label name longer than %d bytes", s.Name, MaxLabelNameBytes)
		case !validLabelName(l.Name):
			return invalid("%s: label name %s: must match [a-zA-Z_][a-zA-Z0-9_]*", s.Name, strconv.Quote(l.Name))
		case len(l.Value) > MaxLabelValueBytes:
			return invalid("%s: label %s: value longer than %d bytes", s.Name, l.Name, MaxLabelValueBytes)
		case !utf8.ValidString(l.Value):
			return invalid("%s: label %s: value is not valid UTF-8", s.Name, l.Name)
		case i > 0 && s.Labels[i-1].Name == l.Name:
			return invalid("%s: label %s appears twice", s.Name, l.Name)
		}
	}
	if s.sizeBound() > MaxSampleBytes {
		if n := s.EncodedSize(); n > MaxSampleBytes {
			return invalid("%s: encodes to %d UTF-16 bytes, more than %d", s.Name, n, MaxSampleBytes)
		}
	}
	return nil
}

// sizeBound is an upper bound of EncodedSize without encoding (most
// samples are far below MaxSampleBytes, and encoding them to measure was
// a fifth of what ahpctl telemetry push spent per line): the fixed keys,
// the value ('g': at most 24 bytes), the time ('f': at most 17
// significant digits, a point and 3 leading zeros, for a time in [1e-3,
// 1e16) ms; any other time is measured), the name, and each label with
// its value escaped at worst (6 bytes a byte), all at 2 UTF-16 bytes a
// byte.
func (s *Sample) sizeBound() int64 {
	if s.T != 0 && (s.T < 1e-3 || s.T >= 1e16) {
		return math.MaxInt64
	}
	n := int64(len(`{"t":,"name":"","value":,"labels":{}}`) + 24 + 24 + len(s.Name))
	for _, l := range s.Labels {
		n += int64(len(l.Name) + 6*len(l.Value) + len(`"":"",`))
	}
	return 2 * n
}

// AppendJSON appends the sample as the JSON object of PROTOCOL.md §8:
// {"t":…,"name":…,"value":…,"labels":{…}}, labels in order. The sample
// must be valid (Normalize).
func (s *Sample) AppendJSON(b []byte) []byte {
	b = append(b, `{"t":`...)
	b = appendNumber(b, s.T, 'f')
	b = append(b, `,"name":`...)
	b = append(b, '"')
	b = append(b, s.Name...) // a valid name needs no escaping
	b = append(b, `","value":`...)
	b = appendNumber(b, s.Value, 'g')
	if len(s.Labels) > 0 {
		b = append(b, `,"labels":{`...)
		for i, l := range s.Labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, l.Name...)
			b = append(b, `":`...)
			b = flow.AppendJSONString(b, l.Value)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendNumber writes a finite float as a JSON number.
func appendNumber(b []byte, v float64, format byte) []byte {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, format, -1, 64)
}

// EncodedSize is the length of AppendJSON's encoding in UTF-16 bytes
// (PROTOCOL.md §4 unit).
func (s *Sample) EncodedSize() int64 {
	var buf [512]byte
	return flow.UTF16Len(string(s.AppendJSON(buf[:0])))
}
