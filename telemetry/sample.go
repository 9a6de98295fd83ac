package telemetry

import "github.com/ahp-dev/ahpd/internal/samples"

// Sample is one measurement (PROTOCOL.md §8): at T (Unix time in
// milliseconds), metric Name had Value. Labels are sorted by name and
// unique once the sample is valid (Normalize). It is internal/samples'
// type, shared with ahpctl's `telemetry push`, which parses and checks
// lines the same way.
type Sample = samples.Sample

// Label is one label of a sample.
type Label = samples.Label

// Bounds of one sample (docs/protocol-decisions.md, "Telemetry channels").
// A sample that breaks one is refused with an error naming the bound.
const (
	MaxNameBytes       = samples.MaxNameBytes
	MaxLabels          = samples.MaxLabels
	MaxLabelNameBytes  = samples.MaxLabelNameBytes
	MaxLabelValueBytes = samples.MaxLabelValueBytes
	MaxSampleBytes     = samples.MaxSampleBytes
)

// ErrInvalidSample is wrapped by every error of Sample.Normalize.
var ErrInvalidSample = samples.ErrInvalidSample

// UnixMilli returns t in the unit of Sample.T, keeping fractions.
func UnixMilli(sec int64, nsec int64) float64 { return samples.UnixMilli(sec, nsec) }

// ValidName reports whether name is a metric name of PROTOCOL.md §8:
// [a-zA-Z_:][a-zA-Z0-9_:.]*.
func ValidName(name string) bool { return samples.ValidName(name) }
