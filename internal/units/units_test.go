package units

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"65536", 65536, true}, {"64KiB", 64 << 10, true}, {"8 MiB", 8 << 20, true},
		{"1gib", 1 << 30, true}, {"1_000", 1000, true}, {"-1", 0, false}, {"1.5MiB", 0, false},
		{"MiB", 0, false}, {"9999999999GiB", 0, false}, {"", 0, false},
		{"1024", 1024, true}, {"8MiB", 8 << 20, true}, {"8mib", 8 << 20, true}, {"2GiB", 2 << 30, true},
		{"1 MiB", 1 << 20, true}, {"x", 0, false},
		// SI units are powers of 1000 (issue 39: 8MB was refused).
		{"8MB", 8_000_000, true}, {"8mb", 8_000_000, true}, {"8 MB", 8_000_000, true}, {"64KB", 64_000, true},
		{"2GB", 2_000_000_000, true}, {"512B", 512, true}, {"8MiB", 8_388_608, true},
		{"1.5MB", 0, false}, {"8M", 0, false}, {"8K", 0, false}, {"MB", 0, false}, {"B", 0, false}, {"9999999999GB", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0"}, {1, "1"}, {1023, "1023"}, {1024, "1KiB"}, {1536, "1536"}, {64 << 10, "64KiB"},
		{1<<20 + 1<<10, "1025KiB"}, {1 << 20, "1MiB"}, {16 << 20, "16MiB"}, {3 << 19, "1536KiB"},
		{1 << 30, "1GiB"}, {1<<30 + 1<<20, "1025MiB"}, {2 << 30, "2GiB"}, {1 << 40, "1024GiB"},
	} {
		got := FormatSize(tc.in)
		if got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.in, got, tc.want)
		}
		if back, err := ParseSize(got); err != nil || back != tc.in {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", tc.in, back, err)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "64KiB", "8 MiB", "-1", "9999999999GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
		if back, err := ParseSize(FormatSize(v)); err != nil || back != v {
			t.Fatalf("ParseSize(FormatSize(%d)) = %d, %v", v, back, err)
		}
	})
}

// TestFormatSizeShort: bytes below 1 KiB, then the largest unit of at
// least 1, one decimal below 10, rounded.
func TestFormatSizeShort(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want string
	}{
		{0, "0"}, {512, "512"}, {1023, "1023"}, {1024, "1.0KiB"}, {1536, "1.5KiB"},
		{12115438, "12MiB"}, {10 << 20, "10MiB"}, {(3 << 30) + (1 << 29), "3.5GiB"}, {2048 << 30, "2048GiB"},
	} {
		if got := FormatSizeShort(c.v); got != c.want {
			t.Errorf("FormatSizeShort(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}
