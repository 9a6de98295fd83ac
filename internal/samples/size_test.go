package samples

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSizeBound: sizeBound is never below EncodedSize, whatever the
// numbers and however much the label values escape.
func TestSizeBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "\x00", "\"", "\\", "\u2028", "é", "😀", "\x1f", " ", "<"}
	numbers := []float64{0, 1, -1, 0.1, 1.0 / 3, math.MaxFloat64, -math.SmallestNonzeroFloat64, 1 << 53, 1<<53 + 2, 123456789.123456789, 1e16 - 2, 9.999999999999998e15, 1e-3, 1.2345678901234567e-3, 1e-7}
	for i := range 20000 {
		s := Sample{Name: strings.Repeat("n", 1+r.IntN(MaxNameBytes)), T: math.Abs(numbers[r.IntN(len(numbers))]), Value: numbers[r.IntN(len(numbers))]}
		if i%3 == 0 {
			s.T = r.Float64() * 2e16
		}
		for j := range r.IntN(MaxLabels + 1) {
			var v strings.Builder
			for v.Len() < r.IntN(MaxLabelValueBytes) {
				v.WriteString(pieces[r.IntN(len(pieces))])
			}
			s.Labels = append(s.Labels, Label{Name: string(rune('a'+j)) + strings.Repeat("x", r.IntN(MaxLabelNameBytes-1)), Value: v.String()})
		}
		if b, n := s.sizeBound(), s.EncodedSize(); b < n {
			t.Fatalf("sizeBound %d < EncodedSize %d for %+v", b, n, s)
		}
	}
}

// FuzzSizeBound: the bound that lets validation skip encoding a sample is
// never below the sample's encoded size.
func FuzzSizeBound(f *testing.F) {
	f.Add(1733290000000.125, "node_cpu_seconds_total", 0.1, "cpu", "0", "mode", "idle")
	f.Add(0.0, "x", -1.2345678901234567e-308, "", "", "", "")
	f.Add(1e-3, "a", math.MaxFloat64, "l", "\x00\x01\"\\\u2028", "m", "\U0001F600")
	f.Add(9.999999999999998e15, "b:c.d", math.Copysign(0, -1), "v", "\xff\xfe", "w", "é") // a negative zero
	f.Fuzz(func(t *testing.T, ts float64, name string, value float64, l1, v1, l2, v2 string) {
		if math.IsNaN(ts) || math.IsInf(ts, 0) || ts < 0 || math.IsNaN(value) || math.IsInf(value, 0) {
			return
		}
		s := Sample{T: ts, Name: name, Value: value}
		if l1 != "" {
			s.Labels = append(s.Labels, Label{Name: l1, Value: v1})
		}
		if l2 != "" {
			s.Labels = append(s.Labels, Label{Name: l2, Value: v2})
		}
		if b, n := s.sizeBound(), s.EncodedSize(); b < n {
			t.Fatalf("%+v: sizeBound %d < EncodedSize %d", s, b, n)
		}
	})
}
