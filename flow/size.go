package flow

import "unicode/utf8"

// MaxSafeInteger is the largest integer a JavaScript number holds exactly
// (2^53 − 1). Every size, position and id on the wire stays at or below it.
const MaxSafeInteger = 1<<53 - 1

// UTF16Len returns the size of s in the protocol's unit, UTF-16 bytes: twice
// the number of UTF-16 code units of s (PROTOCOL.md §4). A rune outside the
// Basic Multilingual Plane is a surrogate pair (4 bytes); every other rune,
// and every invalid UTF-8 byte (which travels as U+FFFD), is 2 bytes.
// It does not allocate.
func UTF16Len(s string) int64 {
	var n int64
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// ASCII runs are the common case; count them without
			// decoding, 8 bytes at a time.
			j := i + 1
			for j+8 <= len(s) && load64(s, j)&msb == 0 {
				j += 8
			}
			for j < len(s) && s[j] < utf8.RuneSelf {
				j++
			}
			n += int64(j-i) * 2
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			n += 4
		} else {
			n += 2
		}
		i += size
	}
	return n
}

// utf16Width returns the UTF-16 byte size of one rune as it travels.
func utf16Width(r rune) int64 {
	if r >= 0x10000 {
		return 4
	}
	return 2
}
