//go:build amd64 && !purego

package flow

// plainBlocks (scan_amd64.s) returns the index of the first byte of the
// whole 16-byte blocks of p[:n] that plainPrefix stops at, or n &^ 15.
//
//go:noescape
func plainBlocks(p *byte, n int) int

// escapeBlocks (scan_amd64.s) escapes whole 16-byte blocks of src into
// dst's room (its length) and returns the bytes written and read; see
// AppendEscapedLen.
//
//go:noescape
func escapeBlocks(dst []byte, src string) (w, r int)

// haveEscapeBlocks says escapeBlocks does the work (it does nothing on
// other architectures).
const haveEscapeBlocks = true
