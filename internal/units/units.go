// Package units parses and formats the sizes operators write in ahpd's
// config file and in `ahpctl limits set`: integers with an optional KiB,
// MiB or GiB suffix.
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize parses "65536", "64KiB", "8 MiB", "1GiB" (case-insensitive
// suffix; '_' separators allowed) into bytes. Negative values and values
// beyond int64 are errors.
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}} {
		if strings.HasSuffix(strings.ToLower(s), u.suffix) {
			num, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(num, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer with an optional KiB, MiB or GiB suffix, got %q", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", s)
	}
	if v > (1<<63-1)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v * mult, nil
}

// FormatSize writes v the way ParseSize reads it: with the largest of
// GiB, MiB and KiB that divides it exactly ("64KiB", "8MiB"), else in
// bytes ("1536" is 1.5 KiB: "1536", not a rounded "1KiB"). 0 is "0".
func FormatSize(v int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}
