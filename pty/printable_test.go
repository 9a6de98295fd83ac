package pty

import (
	"strings"
	"testing"
)

// printableEndRef is printableEnd byte by byte.
func printableEndRef(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7F {
		i++
	}
	return i
}

// eachByteEverywhere calls f with every byte value at every position of
// texts up to 70 bytes long (buf[:n]), from several starts i: what the
// scans with vector instructions (16 bytes a step), words and bytes must
// agree on with a byte-by-byte reference.
func eachByteEverywhere(f func(buf []byte, i, n int)) {
	buf := []byte(strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 2)[:70])
	for n := 0; n <= len(buf); n++ {
		for pos := 0; pos < n; pos++ {
			old := buf[pos]
			for c := 0; c < 256; c++ {
				buf[pos] = byte(c)
				for _, i := range []int{0, 1, 7, 15, 16, 17} {
					if i <= n {
						f(buf, i, n)
					}
				}
			}
			buf[pos] = old
		}
	}
}

// TestPrintableEndAllBytes: printableEnd (whole blocks with vector
// instructions on amd64, then words, then bytes) stops where the
// byte-by-byte scan does.
func TestPrintableEndAllBytes(t *testing.T) {
	eachByteEverywhere(func(buf []byte, i, n int) {
		s := string(buf[:n])
		if got, want := printableEnd(s, i), printableEndRef(s, i); got != want {
			t.Fatalf("printableEnd(%q, %d) = %d, want %d", s, i, got, want)
		}
	})
}

// FuzzPrintableEnd: printableEnd agrees with the byte-by-byte scan on any
// text, from any start.
func FuzzPrintableEnd(f *testing.F) {
	f.Add("the quick brown fox jumps over the lazy dog 0123456789 \r\n", 0)
	f.Add(strings.Repeat("x", 40)+"\x7f\x1b[1m\xc3\xa9", 3)
	f.Add(strings.Repeat("0123456789abcdef", 5)+"~\x80", 16)
	f.Fuzz(func(t *testing.T, s string, i int) {
		if i < 0 || i > len(s) {
			return
		}
		if got, want := printableEnd(s, i), printableEndRef(s, i); got != want {
			t.Fatalf("printableEnd(%q, %d) = %d, want %d", s, i, got, want)
		}
	})
}

// isASCIIRef is isASCII byte by byte.
func isASCIIRef(p []byte) bool {
	for _, c := range p {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// TestIsASCIIAllBytes: isASCII (whole blocks with vector instructions on
// amd64, then words, then bytes) agrees with the byte-by-byte test.
func TestIsASCIIAllBytes(t *testing.T) {
	eachByteEverywhere(func(buf []byte, i, n int) {
		if got, want := isASCII(buf[i:n]), isASCIIRef(buf[i:n]); got != want {
			t.Fatalf("isASCII(%q) = %v, want %v", buf[i:n], got, want)
		}
	})
}
