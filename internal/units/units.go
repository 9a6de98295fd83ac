// Package units parses and formats the sizes operators write in ahpd's
// config file and in `ahpctl limits set`: integers with an optional unit,
// SI (KB, MB, GB: powers of 1000) or IEC (KiB, MiB, GiB: powers of 1024).
package units

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes ParseSize takes, case-insensitive: the IEC
// ones (powers of 1024) and the SI ones (powers of 1000), as disks,
// kubectl (Ki/k) and systemd (K is 1024 there; we take no bare K) do. The
// longer suffix comes first ("mib" before "b").
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1_000}, {"mb", 1_000_000}, {"gb", 1_000_000_000},
	{"b", 1},
}

// SizeRule says how sizes are written, for help texts and errors.
const SizeRule = "an integer with an optional unit: KiB, MiB, GiB (1024, 1024², 1024³ bytes) or KB, MB, GB (1000, 1000², 1000³ bytes)"

// ParseSize parses "65536", "64KiB", "8 MiB", "8MB" (8,000,000), "1GiB"
// (case-insensitive unit, see SizeRule; '_' separators allowed) into
// bytes. Fractions, negative values and values beyond int64 are errors.
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	lower := strings.ToLower(s)
	for _, u := range sizeUnits {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(num, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want %s, got %q", SizeRule, s)
	}
	if v < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", s)
	}
	if v > (1<<63-1)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v * mult, nil
}

// FormatSizeShort writes v for a person reading a table: in bytes below
// 1 KiB, else in the largest of KiB, MiB and GiB that is at least 1, with
// one decimal below 10 ("512", "1.5KiB", "12MiB", "3.2GiB"). It rounds;
// FormatSize is exact.
func FormatSizeShort(v int64) string {
	if v < 1<<10 && v > -(1<<10) {
		return strconv.FormatInt(v, 10)
	}
	f, suffix := float64(v)/(1<<10), "KiB"
	for _, u := range []string{"MiB", "GiB"} {
		if f < 1<<10 && f > -(1<<10) {
			break
		}
		f, suffix = f/(1<<10), u
	}
	if f < 10 && f > -10 {
		return strconv.FormatFloat(f, 'f', 1, 64) + suffix
	}
	return strconv.FormatFloat(f, 'f', 0, 64) + suffix
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
