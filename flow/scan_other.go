//go:build !amd64 || purego

package flow

import (
	"math/bits"
	"unsafe"
)

// plainBlocks returns the index of the first byte of the whole 16-byte
// blocks of p[:n] that plainPrefix stops at, or n &^ 15, a word at a time
// (scan_amd64.s does it with vector instructions).
func plainBlocks(p *byte, n int) int {
	w := unsafe.String(p, n&^15)
	for i := 0; i < len(w); i += 8 {
		x := load64(w, i)
		if m := specialBytes(x) | x&msb; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return len(w)
}

// escapeBlocks is scan_amd64.s's escapeBlocks, which has no portable
// version: it escapes nothing (haveEscapeBlocks is false), and
// AppendEscapedLen does the work.
func escapeBlocks(dst []byte, src string) (w, r int) { return 0, 0 }

const haveEscapeBlocks = false
