package samples

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestNormalizeBounds: samples at and just past every bound of Normalize;
// each refusal wraps ErrInvalidSample.
func TestNormalizeBounds(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	labels := func(n int) []Label {
		var ls []Label
		for i := range n {
			ls = append(ls, Label{Name: "l" + long(i), Value: "v"})
		}
		return ls
	}
	big := func() []Label {
		var ls []Label
		for i := range 16 {
			ls = append(ls, Label{Name: string(rune('a'+i)) + long(99), Value: strings.Repeat("\"", 100)})
		}
		return ls
	}
	for _, c := range []struct {
		s  Sample
		ok bool
	}{
		{Sample{Name: "ok", Value: 1}, true},
		{Sample{Name: long(200), Value: 1}, true}, {Sample{Name: long(201), Value: 1}, false},
		{Sample{Name: "9x", Value: 1}, false}, {Sample{Name: "a.b:c_9", Value: 1}, true}, {Sample{Name: "", Value: 1}, false},
		{Sample{Name: "x", T: -1}, false}, {Sample{Name: "x", T: math.Inf(1)}, false}, {Sample{Name: "x", Value: math.NaN()}, false},
		{Sample{Name: "x", Labels: labels(16)}, true}, {Sample{Name: "x", Labels: labels(17)}, false},
		{Sample{Name: "x", Labels: []Label{{Name: long(100), Value: "v"}}}, true},
		{Sample{Name: "x", Labels: []Label{{Name: long(101), Value: "v"}}}, false},
		{Sample{Name: "x", Labels: []Label{{Name: "k", Value: long(256)}}}, true},
		{Sample{Name: "x", Labels: []Label{{Name: "k", Value: long(257)}}}, false},
		{Sample{Name: "x", Labels: []Label{{Name: "k", Value: "\xff"}}}, false},
		{Sample{Name: "x", Labels: []Label{{Name: "b", Value: "1"}, {Name: "a", Value: "2"}, {Name: "b", Value: "3"}}}, false},
		{Sample{Name: "x", Labels: []Label{{Name: "9", Value: "1"}}}, false},
		// 16 labels of 100-byte names and 100 escaped quotes: past 2 KiB.
		{Sample{Name: long(200), Labels: big()}, false},
	} {
		err := c.s.Normalize()
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrInvalidSample) {
			t.Errorf("Normalize(%.60q…, %d labels) = %v, want ok %v", c.s.Name, len(c.s.Labels), err, c.ok)
		}
	}
}
