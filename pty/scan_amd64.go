//go:build amd64 && !purego

package pty

// printableBlocks (scan_amd64.s) returns the index of the first byte of
// the whole 16-byte blocks of p[:n] that is not printable ASCII, or
// n &^ 15.
//
//go:noescape
func printableBlocks(p *byte, n int) int

// asciiBlocks (scan_amd64.s) reports whether the whole 16-byte blocks of
// p[:n] hold no byte from 0x80.
//
//go:noescape
func asciiBlocks(p *byte, n int) bool
