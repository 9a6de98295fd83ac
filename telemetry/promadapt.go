package telemetry

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// HistogramMode says what a scrape source makes of a histogram or a
// summary (ScrapeConfig.Histograms).
type HistogramMode string

// The histogram modes.
const (
	// HistogramQuantiles (the default): a histogram's quantiles over each
	// interval, computed from the increase of its buckets as Prometheus'
	// histogram_quantile(rate(...)) does; a summary's quantiles as the
	// target exposes them. Named as the family, with a label quantile.
	HistogramQuantiles HistogramMode = "quantiles"
	// HistogramRates: NAME_sum_per_second and NAME_count_per_second, the
	// per-second rates of the _sum and _count counters.
	HistogramRates HistogramMode = "rates"
	// HistogramBoth: both of the above.
	HistogramBoth HistogramMode = "both"
)

// DefaultQuantiles are the quantiles HistogramQuantiles keeps when none
// are chosen.
var DefaultQuantiles = []float64{0.5, 0.9, 0.99}

// LabelMatcher keeps the series whose label Name matches: = and != compare
// the value, =~ and !~ match it against an anchored regular expression
// (RE2), as a Prometheus selector does. A label a series lacks has the
// value "".
type LabelMatcher struct {
	Name  string
	Op    string // "=", "!=", "=~", "!~"
	Value string
	re    *regexp.Regexp
}

// maxMatcherBytes bounds one --match or --label expression.
const maxMatcherBytes = 1024

// ParseLabelMatcher parses NAME=VALUE, NAME!=VALUE, NAME=~RE or NAME!~RE.
func ParseLabelMatcher(s string) (LabelMatcher, error) {
	if len(s) > maxMatcherBytes {
		return LabelMatcher{}, fmt.Errorf("%d bytes, more than %d", len(s), maxMatcherBytes)
	}
	i := strings.IndexAny(s, "=!")
	if i <= 0 {
		return LabelMatcher{}, fmt.Errorf("%q: want NAME=VALUE, NAME!=VALUE, NAME=~REGEX or NAME!~REGEX", s)
	}
	m := LabelMatcher{Name: s[:i]}
	rest := s[i:]
	for _, op := range []string{"=~", "!~", "!=", "="} {
		if strings.HasPrefix(rest, op) {
			m.Op, m.Value = op, rest[len(op):]
			break
		}
	}
	if m.Op == "" || !validLabel(m.Name) {
		return LabelMatcher{}, fmt.Errorf("%q: want NAME=VALUE, NAME!=VALUE, NAME=~REGEX or NAME!~REGEX with NAME a label name", s)
	}
	if m.Op == "=~" || m.Op == "!~" {
		re, err := regexp.Compile("^(?:" + m.Value + ")$")
		if err != nil {
			return LabelMatcher{}, fmt.Errorf("%q: %v", s, err)
		}
		m.re = re
	}
	return m, nil
}

// validLabel reports whether name is a label name of PROTOCOL.md §8.
func validLabel(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func (m *LabelMatcher) matches(v string) bool {
	switch m.Op {
	case "=":
		return v == m.Value
	case "!=":
		return v != m.Value
	case "=~":
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

// compileMatch compiles a --match expression: an anchored RE2 on the
// family name.
func compileMatch(s string) (*regexp.Regexp, error) {
	if len(s) > maxMatcherBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", len(s), maxMatcherBytes)
	}
	re, err := regexp.Compile("^(?:" + s + ")$")
	if err != nil {
		return nil, fmt.Errorf("%q: %v", s, err)
	}
	return re, nil
}

// promAdapter turns the metric families of successive scrapes into
// samples: gauges and untyped as they are, counters as per-second rates
// between two scrapes, histograms and summaries by mode. It keeps the
// previous scrape's cumulative values, at most maxSeries of them. Not
// safe for concurrent use: the Scrape's goroutine owns it.
type promAdapter struct {
	match     []*regexp.Regexp // any; none: every family
	labels    []LabelMatcher   // all
	mode      HistogramMode
	quantiles []float64
	maxSeries int

	prev   map[string]prevPoint
	prevAt time.Time
}

// prevPoint is a series' cumulative value at the previous scrape; a
// histogram's buckets too (upper bounds and cumulative counts, +Inf last).
type prevPoint struct {
	v      float64
	bounds []float64
	counts []float64
}

// adaptStats counts what one conversion left out.
type adaptStats struct {
	Invalid int // samples that break PROTOCOL.md §8's bounds, or are not finite
	Beyond  int // samples beyond maxSeries
}

// adapt converts one scrape's families (at now) into samples.
func (a *promAdapter) adapt(fams []*dto.MetricFamily, now time.Time) ([]Sample, adaptStats) {
	var st adaptStats
	t := nowMilli(now)
	dt := now.Sub(a.prevAt).Seconds()
	rates := !a.prevAt.IsZero() && dt > 0
	next := make(map[string]prevPoint, len(a.prev))
	var out []Sample
	var key strings.Builder

	emit := func(name string, labels []Label, v float64) {
		if len(out) >= a.maxSeries {
			st.Beyond++
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			st.Invalid++
			return
		}
		s := Sample{T: t, Name: name, Value: v, Labels: labels}
		if err := s.Normalize(); err != nil {
			st.Invalid++
			return
		}
		out = append(out, s)
	}
	// remember keeps p as the series' value for the next scrape and
	// returns the previous one.
	remember := func(k string, p prevPoint) (prevPoint, bool) {
		if len(next) < a.maxSeries {
			next[k] = p
		}
		old, ok := a.prev[k]
		return old, ok && rates
	}
	rate := func(k, name string, labels []Label, cur float64) {
		old, ok := remember(k, prevPoint{v: cur})
		// A counter that went back was reset (its process restarted):
		// its rate starts again at the next scrape, never negative.
		if ok && cur >= old.v {
			emit(name, labels, (cur-old.v)/dt)
		}
	}

	fams = slices.Clone(fams)
	slices.SortFunc(fams, func(x, y *dto.MetricFamily) int { return strings.Compare(x.GetName(), y.GetName()) })
	for _, f := range fams {
		name := f.GetName()
		if !a.keep(name) {
			continue
		}
		for _, m := range f.GetMetric() {
			if m == nil {
				continue
			}
			labels := make([]Label, 0, len(m.GetLabel())+1)
			for _, lp := range m.GetLabel() {
				labels = append(labels, Label{Name: lp.GetName(), Value: lp.GetValue()})
			}
			slices.SortFunc(labels, cmpLabels)
			if !a.keepLabels(labels) {
				continue
			}
			key.Reset()
			key.WriteString(name)
			for _, l := range labels {
				key.WriteByte(0xff)
				key.WriteString(l.Name)
				key.WriteByte(0xfe)
				key.WriteString(l.Value)
			}
			k := key.String()
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				emit(name, labels, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				emit(name, labels, m.GetUntyped().GetValue())
			case dto.MetricType_COUNTER:
				rate(k, strings.TrimSuffix(name, "_total")+"_per_second", labels, m.GetCounter().GetValue())
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				if a.mode != HistogramRates {
					for _, q := range s.GetQuantile() {
						if a.wants(q.GetQuantile()) {
							emit(name, withLabel(labels, "quantile", formatQuantile(q.GetQuantile())), q.GetValue())
						}
					}
				}
				if a.mode != HistogramQuantiles {
					rate(k+"\xff_sum", name+"_sum_per_second", labels, s.GetSampleSum())
					rate(k+"\xff_count", name+"_count_per_second", labels, float64(s.GetSampleCount()))
				}
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				count := float64(h.GetSampleCount())
				if h.SampleCountFloat != nil {
					count = h.GetSampleCountFloat()
				}
				if a.mode != HistogramRates {
					a.histogramQuantiles(k, name, labels, h, count, remember, emit)
				}
				if a.mode != HistogramQuantiles {
					rate(k+"\xff_sum", name+"_sum_per_second", labels, h.GetSampleSum())
					rate(k+"\xff_count", name+"_count_per_second", labels, count)
				}
			}
		}
	}
	a.prev, a.prevAt = next, now
	return out, st
}

// histogramQuantiles emits the chosen quantiles of the observations a
// histogram's buckets counted since the previous scrape. Nothing when
// there were none, when its buckets changed or were reset, or when its
// buckets are not cumulative.
func (a *promAdapter) histogramQuantiles(k, name string, labels []Label, h *dto.Histogram, count float64,
	remember func(string, prevPoint) (prevPoint, bool), emit func(string, []Label, float64)) {
	bs := h.GetBucket()
	p := prevPoint{bounds: make([]float64, 0, len(bs)+1), counts: make([]float64, 0, len(bs)+1)}
	for _, b := range bs {
		if b == nil || math.IsInf(b.GetUpperBound(), 1) {
			continue // the +Inf bucket is the count, appended below
		}
		c := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			c = b.GetCumulativeCountFloat()
		}
		p.bounds = append(p.bounds, b.GetUpperBound())
		p.counts = append(p.counts, c)
	}
	if len(p.bounds) == 0 {
		return // a native histogram: no classic buckets
	}
	p.bounds = append(p.bounds, math.Inf(1))
	p.counts = append(p.counts, count)
	for i := 1; i < len(p.bounds); i++ {
		if !(p.bounds[i] > p.bounds[i-1]) || p.counts[i] < p.counts[i-1] {
			return
		}
	}
	old, ok := remember(k, p)
	if !ok || !slices.Equal(old.bounds, p.bounds) {
		return
	}
	delta := make([]float64, len(p.counts))
	for i := range delta {
		delta[i] = p.counts[i] - old.counts[i]
		if delta[i] < 0 || i > 0 && delta[i] < delta[i-1] {
			return // reset, or not cumulative
		}
	}
	if delta[len(delta)-1] <= 0 {
		return
	}
	for _, q := range a.quantiles {
		emit(name, withLabel(labels, "quantile", formatQuantile(q)), bucketQuantile(q, p.bounds, delta))
	}
}

// bucketQuantile is the q-quantile of observations counted in cumulative
// buckets (upper bounds, the last +Inf), interpolated linearly inside its
// bucket, the first starting at 0 (or at its bound if that is not
// positive), as Prometheus' histogram_quantile does. One in the +Inf
// bucket is the highest finite bound.
func bucketQuantile(q float64, bounds, cum []float64) float64 {
	n := len(bounds)
	rank := q * cum[n-1]
	b := 0
	for b < n-1 && cum[b] < rank {
		b++
	}
	if b == n-1 {
		if n < 2 {
			return math.NaN()
		}
		return bounds[n-2]
	}
	if b == 0 && bounds[0] <= 0 {
		return bounds[0]
	}
	start, below := 0.0, 0.0
	if b > 0 {
		start, below = bounds[b-1], cum[b-1]
	}
	if cum[b] == below {
		return bounds[b]
	}
	return start + (bounds[b]-start)*(rank-below)/(cum[b]-below)
}

func (a *promAdapter) keep(name string) bool {
	if len(a.match) == 0 {
		return true
	}
	for _, re := range a.match {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func (a *promAdapter) keepLabels(labels []Label) bool {
	for i := range a.labels {
		m := &a.labels[i]
		v := ""
		if j, ok := slices.BinarySearchFunc(labels, m.Name, func(l Label, n string) int { return strings.Compare(l.Name, n) }); ok {
			v = labels[j].Value
		}
		if !m.matches(v) {
			return false
		}
	}
	return true
}

func (a *promAdapter) wants(q float64) bool {
	for _, w := range a.quantiles {
		if math.Abs(w-q) < 1e-9 {
			return true
		}
	}
	return false
}

// withLabel returns labels (sorted) with name=value added in order; a
// label of that name already there is replaced.
func withLabel(labels []Label, name, value string) []Label {
	out := make([]Label, 0, len(labels)+1)
	for _, l := range labels {
		if l.Name != name {
			out = append(out, l)
		}
	}
	i, _ := slices.BinarySearchFunc(out, name, func(l Label, n string) int { return strings.Compare(l.Name, n) })
	return slices.Insert(out, i, Label{Name: name, Value: value})
}

func formatQuantile(q float64) string { return strconv.FormatFloat(q, 'g', -1, 64) }

func cmpLabels(x, y Label) int { return strings.Compare(x.Name, y.Name) }
