package telemetry

import (
	"math"
	"testing"
)

// FuzzSizeBound: the bound that lets validation skip encoding a sample is
// never below the sample's encoded size.
func FuzzSizeBound(f *testing.F) {
	f.Add(1733290000000.125, "node_cpu_seconds_total", 0.1, "cpu", "0", "mode", "idle")
	f.Add(0.0, "x", -1.2345678901234567e-308, "", "", "", "")
	f.Add(1e-3, "a", math.MaxFloat64, "l", "\x00\x01\"\\\u2028", "m", "\U0001F600")
	f.Add(9.999999999999998e15, "b:c.d", -0.0, "v", "\xff\xfe", "w", "é")
	f.Fuzz(func(t *testing.T, ts float64, name string, value float64, l1, v1, l2, v2 string) {
		s := Sample{T: ts, Name: name, Value: value}
		if l1 != "" {
			s.Labels = append(s.Labels, Label{l1, v1})
		}
		if l2 != "" {
			s.Labels = append(s.Labels, Label{l2, v2})
		}
		if math.IsNaN(ts) || math.IsInf(ts, 0) || ts < 0 || math.IsNaN(value) || math.IsInf(value, 0) {
			return
		}
		if b, n := s.sizeBound(), s.encodedSize(); b < n {
			t.Fatalf("%+v: sizeBound %d < encodedSize %d", s, b, n)
		}
	})
}
