package linkemu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ahp-dev/ahpd/internal/units"
)

// ParseRate reads a bandwidth: N with a unit of bit/s (kbit, mbit, gbit)
// or a size per second (bytes/s, as units.ParseSize reads it, or with a
// decimal point and KB/MB/GB): the -rate of bench/linkemu and
// bench/linkbench.
func ParseRate(s string) (int64, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"gbit", 1e9 / 8}, {"mbit", 1e6 / 8}, {"kbit", 1e3 / 8}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}} {
		if num, ok := strings.CutSuffix(l, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f <= 0 {
				return 0, fmt.Errorf("%q: want e.g. 100mbit or 12.5MB", s)
			}
			return int64(f * u.mult), nil
		}
	}
	n, err := units.ParseSize(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want e.g. 100mbit or 12.5MB", s)
	}
	return n, nil
}
