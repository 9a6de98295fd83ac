//go:build amd64 && !purego

package flow

// plainBlocks (scan_amd64.s) returns the index of the first byte of the
// whole 16-byte blocks of p[:n] that plainPrefix stops at, or n &^ 15.
//
//go:noescape
func plainBlocks(p *byte, n int) int
