//go:build !amd64 || purego

package pty

import "unsafe"

// printableBlocks returns the index of the first byte of the whole
// 16-byte blocks of p[:n] that is not printable ASCII, or n &^ 15, a word
// at a time (scan_amd64.s does it with vector instructions).
func printableBlocks(p *byte, n int) int {
	w := unsafe.String(p, n&^15)
	return printableWords(w, 0)
}

// asciiBlocks reports whether the whole 16-byte blocks of p[:n] hold no
// byte from 0x80, a word at a time (scan_amd64.s does it with vector
// instructions).
func asciiBlocks(p *byte, n int) bool {
	return asciiWords(unsafe.Slice(p, n&^15))
}
