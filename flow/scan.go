package flow

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// Word-at-a-time scanning for the hot paths (fragmenting and decoding
// frames). Each function looks at 8 bytes per step with the classic SWAR
// test: for a word v, (v − 0x01…01) &^ v & 0x80…80 flags the zero bytes of
// v, and (v − 0x01…01·n) &^ v flags the bytes below n. A borrow can only
// set flags above the lowest byte that really matches, so "some byte
// matches" and "the lowest flagged byte" are exact. plainPrefix, the
// escapers' scan, takes whole 16-byte blocks first with plainBlocks: SSE2
// on amd64 (scan_amd64.s), words elsewhere and with the purego tag.

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 reads 8 bytes of s at i, little-endian (one load on amd64/arm64).
func load64(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// specialBytes flags, with each byte's high bit, the bytes of x that are a
// control character, '"' or '\\'.
func specialBytes(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return (((x - lsb*0x20) &^ x) | ((q - lsb) &^ q) | ((b - lsb) &^ b)) & msb
}

// plainPrefix returns the index of the first byte in s[i:limit] that is
// not written as itself in a JSON string (control characters, '"', '\\'
// and non-ASCII bytes), or limit.
func plainPrefix(s string, i, limit int) int {
	// w shrinks from the front, so the loads need no bounds checks.
	w := s[i:limit]
	// Whole 16-byte blocks first (plainBlocks: vector instructions on
	// amd64), then words and bytes.
	if len(w) >= 16 {
		blocks := len(w) &^ 15
		k := plainBlocks(unsafe.StringData(w), len(w))
		if k < blocks {
			return i + k
		}
		w = w[blocks:]
	}
	for len(w) >= 8 {
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if m := specialBytes(x) | x&msb; m != 0 {
			return limit - len(w) + bits.TrailingZeros64(m)/8
		}
		w = w[8:]
	}
	for len(w) > 0 && safeByte[w[0]] {
		w = w[1:]
	}
	return limit - len(w)
}

// stringEnd returns the index of the first byte of b[i:] that is '"',
// '\\' or a control character, or len(b), and whether the bytes before it
// were all ASCII.
func stringEnd(b []byte, i int) (int, bool) {
	var high uint64
	// 128 bytes word by word, then, if they were plain, a long run (the
	// base64 of tcp/data, longer than a terminal's lines between two
	// escapes) by longRun, and what is left of it word by word again.
	limit := min(len(b), i+128)
	for {
		for i+8 <= limit {
			x := binary.LittleEndian.Uint64(b[i:])
			// Non-ASCII bytes never stop a string: mask their flags out.
			if m := specialBytes(x) &^ x; m != 0 {
				k := bits.TrailingZeros64(m) / 8
				high |= x & (1<<(8*k) - 1) // only the bytes before the stop
				return i + k, high&msb == 0
			}
			high |= x
			i += 8
		}
		if limit == len(b) {
			break
		}
		i, high = longRun(b, i, high)
		limit = len(b)
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		high |= uint64(c)
	}
	return i, high&msb == 0
}

// longRunChunk is the most longRun looks at per step: enough for the
// runtime's vector IndexByte to pay. Its first step looks at half of
// that, so that a string with an escape every long line or so is not
// searched far past each one.
const longRunChunk = 512

// longRun skips plain bytes of b from i in chunks: the runtime's
// IndexByte (vector code) finds the first '\\' in each and the first '"'
// before it, and one SWAR test per word, 32 bytes a step, looks for
// control characters before those, against specialBytes' three tests a
// word. It returns a position less than 32 bytes before the first stop
// or the end of b, and high with the bytes it skipped ORed in.
func longRun(b []byte, i int, high uint64) (int, uint64) {
	for size := longRunChunk / 2; len(b)-i >= 32; size = longRunChunk {
		c := b[i:min(len(b), i+size)]
		n := len(c)
		if s := bytes.IndexByte(c, '\\'); s >= 0 {
			n = s
		}
		if q := bytes.IndexByte(c[:n], '"'); q >= 0 {
			n = q
		}
		// c[:n] holds no '"' or '\\'; control characters, 32 bytes a step
		// (w shrinks from the front, so the loads need no bounds checks).
		w := c[:n]
		for len(w) >= 32 {
			x0 := binary.LittleEndian.Uint64(w[0:8])
			x1 := binary.LittleEndian.Uint64(w[8:16])
			x2 := binary.LittleEndian.Uint64(w[16:24])
			x3 := binary.LittleEndian.Uint64(w[24:32])
			if ((x0-lsb*0x20)&^x0|(x1-lsb*0x20)&^x1|(x2-lsb*0x20)&^x2|(x3-lsb*0x20)&^x3)&msb != 0 {
				break
			}
			high |= x0 | x1 | x2 | x3
			w = w[32:]
		}
		j := n - len(w)
		i += j
		if j < size {
			return i, high // a stop, or the end of b, is within 32 bytes
		}
	}
	return i, high
}

// validUTF16Len reports whether b is valid UTF-8 and returns its size in
// UTF-16 bytes, in one pass.
func validUTF16Len(b []byte) (int64, bool) {
	var n int64
	i := 0
	for i < len(b) {
		if i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:])&msb == 0 {
			n += 16
			i += 8
			continue
		}
		c := b[i]
		if c < utf8.RuneSelf {
			n += 2
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return 0, false
		}
		n += utf16Width(r)
		i += size
	}
	return n, true
}
