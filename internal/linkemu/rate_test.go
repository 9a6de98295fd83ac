package linkemu

import "testing"

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{
		"100mbit": 12_500_000, "1gbit": 125_000_000, "800kbit": 100_000,
		"12.5MB": 12_500_000, "1MiB": 1 << 20, "65536": 65536,
	} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0mbit", "-1MB", "fast", "10 parsecs"} {
		if got, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", in, got)
		}
	}
}
