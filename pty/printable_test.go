package pty

import "testing"

func TestPrintableEndAllBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 12; pos++ {
			b := []byte("abcdefghijklmnopq")
			b[pos] = byte(c)
			want := pos
			if c >= 0x20 && c < 0x7F {
				want = len(b)
			}
			if got := printableEnd(string(b), 0); got != want {
				t.Fatalf("byte %#x at %d: got %d want %d", c, pos, got, want)
			}
		}
	}
}
