// Package b64 is standard padded base64 (RFC 4648 §4, what AHP/1's
// tcp/data and tcp/input carry) with the same results as
// encoding/base64.StdEncoding. TCP channels move every byte through it
// once each way; the standard library's codec was a fifth of the daemon's
// CPU and of the client's.
//
// Where the CPU has vector instructions for it (AVX2 on amd64, NEON on
// arm64) it uses github.com/segmentio/asm/base64 for inputs of minVector
// bytes and more: 6–9× the portable code below on this project's machines
// (BenchmarkEncode, BenchmarkDecode against their Portable variants).
// Elsewhere (other CPUs, the purego build tag, short inputs) it uses the
// portable code, about twice as fast as the standard library's: it
// encodes 6 bytes to 8 characters with two 12-bit table lookups per 3
// bytes and one 64-bit store, and decodes 8 characters with four 16-bit
// table lookups.
package b64

import (
	"encoding/base64"
	"encoding/binary"
	"sync"

	asm "github.com/segmentio/asm/base64"
)

// minVector is the shortest input given to asm's codec: below its own
// minimums (28–48 bytes) it hands everything to the standard library,
// slower than the portable code, and a call costs more than it saves.
const minVector = 64

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var (
	// enc12[v] is the two characters of the 12-bit value v, the first
	// in the low byte.
	enc12 [1 << 12]uint16
	// dec16[c0|c1<<8] is the 12-bit value of the two characters c0 c1,
	// or invalid when either is not in the alphabet.
	dec16 [1 << 16]uint16
)

const invalid = 0xffff

// tables builds enc12 and dec16 when the portable code first runs, not at
// every start: 136 KiB that a daemon with no TCP channel never touches
// (docs/benchmarks-memory.md).
var tables sync.Once

func buildTables() {
	for v := range enc12 {
		enc12[v] = uint16(alphabet[v>>6]) | uint16(alphabet[v&63])<<8
	}
	var dec [256]int
	for i := range dec {
		dec[i] = -1
	}
	for i := range len(alphabet) {
		dec[alphabet[i]] = i
	}
	for p := range dec16 {
		a, b := dec[p&0xff], dec[p>>8]
		if a < 0 || b < 0 {
			dec16[p] = invalid
		} else {
			dec16[p] = uint16(a<<6 | b)
		}
	}
}

// AppendEncode appends the encoding of src to dst.
func AppendEncode(dst, src []byte) []byte {
	if vector && len(src) >= minVector {
		j := len(dst)
		dst = grow(dst, base64.StdEncoding.EncodedLen(len(src)))
		asm.StdEncoding.Encode(dst[j:], src)
		return dst
	}
	return appendEncodePortable(dst, src)
}

func appendEncodePortable(dst, src []byte) []byte {
	tables.Do(buildTables)
	n := base64.StdEncoding.EncodedLen(len(src))
	j := len(dst)
	dst = grow(dst, n)
	out := dst[j : j+n]
	i, o := 0, 0
	// 8 bytes are loaded for each 6 encoded.
	for ; len(src)-i >= 8; i, o = i+6, o+8 {
		x := binary.BigEndian.Uint64(src[i:])
		binary.LittleEndian.PutUint64(out[o:], uint64(enc12[x>>52])|
			uint64(enc12[x>>40&0xfff])<<16|
			uint64(enc12[x>>28&0xfff])<<32|
			uint64(enc12[x>>16&0xfff])<<48)
	}
	base64.StdEncoding.Encode(out[o:], src[i:])
	return dst
}

// AppendDecode appends the decoding of src to dst. It returns what
// base64.StdEncoding.AppendDecode returns, errors included (a
// CorruptInputError's offset counts from the start of src).
func AppendDecode(dst, src []byte) ([]byte, error) {
	if vector && len(src) >= minVector {
		j := len(dst)
		dst = grow(dst, base64.StdEncoding.DecodedLen(len(src)))
		n, err := asm.StdEncoding.Decode(dst[j:], src)
		if err != nil {
			// asm's error offset counts from where its vector code
			// stopped; the standard library's counts from src.
			return base64.StdEncoding.AppendDecode(dst[:j], src)
		}
		return dst[:j+n], nil
	}
	return appendDecodePortable(dst, src)
}

func appendDecodePortable(dst, src []byte) ([]byte, error) {
	tables.Do(buildTables)
	j := len(dst)
	dst = grow(dst, base64.StdEncoding.DecodedLen(len(src))+8)
	out := dst[j:cap(dst)]
	i, o := 0, 0
	// The last quantum may hold padding: the standard decoder takes it.
	// 8 bytes are stored for each 6 decoded; out has 8 spare.
	for ; len(src)-i > 8; i, o = i+8, o+6 {
		x := binary.LittleEndian.Uint64(src[i:])
		a, b, c, d := dec16[x&0xffff], dec16[x>>16&0xffff], dec16[x>>32&0xffff], dec16[x>>48]
		if (a|b|c|d)&0xf000 != 0 { // valid values have 12 bits
			break // the standard decoder reports it (or skips \r and \n)
		}
		binary.BigEndian.PutUint64(out[o:], (uint64(a)<<36|uint64(b)<<24|uint64(c)<<12|uint64(d))<<16)
	}
	n, err := base64.StdEncoding.Decode(out[o:], src[i:])
	if ce, ok := err.(base64.CorruptInputError); ok {
		err = base64.CorruptInputError(int64(ce) + int64(i))
	}
	return dst[:j+o+n], err
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, len(b)+n+len(b)/4)
	copy(nb, b)
	return nb
}
