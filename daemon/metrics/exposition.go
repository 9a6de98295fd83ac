package metrics

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Metric types of the text exposition format.
const (
	gauge   = "gauge"
	counter = "counter"
	summary = "summary"
)

// desc describes a metric family: its name, help, type and label names.
type desc struct {
	name, help, typ string
	labels          []string
}

func newDesc(typ, name, help string, labels ...string) *desc {
	return &desc{name: name, help: help, typ: typ, labels: labels}
}

// sample is one line of a family: the name's suffix (a summary's _sum and
// _count), the rendered labels and the value.
type sample struct {
	suffix, labels string
	value          float64
}

// exposition gathers the samples of a scrape and writes them in the text
// exposition format (version 0.0.4), as Prometheus' Go client does:
// families sorted by name, each with its HELP and TYPE, its samples
// together and sorted by their labels, label pairs sorted by name.
type exposition struct {
	fams map[string]*family
}

type family struct {
	d       *desc
	samples []sample
}

// add adds a sample of d with the values of d's labels, in d's order.
func (e *exposition) add(d *desc, v float64, values ...string) {
	pairs := make([][2]string, len(d.labels))
	for i, name := range d.labels {
		pairs[i] = [2]string{name, values[i]}
	}
	e.addPairs(d, "", pairs, v)
}

// addPairs adds a sample of d with the suffix and label pairs given.
func (e *exposition) addPairs(d *desc, suffix string, pairs [][2]string, v float64) {
	if e.fams == nil {
		e.fams = map[string]*family{}
	}
	f := e.fams[d.name]
	if f == nil {
		f = &family{d: d}
		e.fams[d.name] = f
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var b strings.Builder
	for i, p := range pairs {
		if i == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(p[0])
		b.WriteString(`="`)
		b.WriteString(labelEscaper.Replace(p[1]))
		b.WriteByte('"')
	}
	if len(pairs) > 0 {
		b.WriteByte('}')
	}
	f.samples = append(f.samples, sample{suffix: suffix, labels: b.String(), value: v})
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// bytes writes the exposition.
func (e *exposition) bytes() []byte {
	names := make([]string, 0, len(e.fams))
	for name := range e.fams {
		names = append(names, name)
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, name := range names {
		f := e.fams[name]
		b.WriteString("# HELP " + name + " " + helpEscaper.Replace(f.d.help) + "\n")
		b.WriteString("# TYPE " + name + " " + f.d.typ + "\n")
		slices.SortStableFunc(f.samples, func(x, y sample) int {
			if c := strings.Compare(x.suffix, y.suffix); c != 0 {
				return c
			}
			return strings.Compare(x.labels, y.labels)
		})
		for _, s := range f.samples {
			b.WriteString(name + s.suffix + s.labels + " ")
			b.WriteString(formatValue(s.value))
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// formatValue writes v as the format wants it: Go's shortest float, and
// +Inf, -Inf and NaN spelt so.
func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
