package flow

import (
	"math"
	"strings"
	"unicode/utf8"
)

// The JSON string encoding used everywhere in ahpd (frames, logical
// messages). It escapes only what JSON requires: '"', '\\' and the control
// characters U+0000–U+001F. It does not escape '<', '>', '&', U+2028 or
// U+2029 (encoding/json does; RFC 8259 and ECMAScript 2019 JSON.parse do not
// need it), so terminal output is not inflated. Invalid UTF-8 bytes are
// written as U+FFFD, one per byte, so the output is always valid UTF-8 and
// a valid WebSocket text message.

const hexDigits = "0123456789abcdef"

// escapeLen[c] is the escaped length in bytes of the ASCII byte c: 1 when it
// is written as itself, 2 for the short escapes, 6 for \u00XX.
var escapeLen [utf8.RuneSelf]uint8

// shortEscape[c] is the letter of c's two-byte escape ('\\' and it), or
// 0 for a byte without one (appendEscapedASCII, and escapeBlocks in
// scan_amd64.s).
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\n': 'n', '\r': 'r', '\t': 't', '\b': 'b', '\f': 'f'}

func init() {
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			escapeLen[c] = 2
		case c < 0x20:
			escapeLen[c] = 6
		default:
			escapeLen[c] = 1
		}
	}
}

// AppendJSONString appends s to dst as a quoted JSON string and returns the
// extended buffer.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendEscaped appends the body of the JSON string AppendJSONString
// writes for s, without the quotes.
func AppendEscaped(dst []byte, s string) []byte {
	dst, _ = AppendEscapedLen(dst, s)
	return dst
}

// AppendEscapedLen is AppendEscaped that also returns EscapedLen(s), in
// the same pass. On amd64 it copies and escapes runs of ASCII 16 bytes
// at a time (escapeBlocks), so it may write into dst's capacity beyond
// the length it returns; it never grows dst more than append would.
func AppendEscapedLen(dst []byte, s string) ([]byte, int64) {
	var n int64
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// A run of ASCII: whole blocks copied and escaped in one pass
			// (amd64), in dst's room only, so that dst grows as append
			// would make it.
			if haveEscapeBlocks && len(s)-i >= 16 && cap(dst)-len(dst)-(i-start) >= 34 {
				dst = append(dst, s[start:i]...)
				w, r := escapeBlocks(dst[len(dst):cap(dst)], s[i:])
				dst = dst[:len(dst)+w]
				n += 2 * int64(w) // ASCII: two UTF-16 bytes per byte written
				i += r
				start = i
				if r > 0 {
					continue
				}
			}
			if safeByte[c] {
				j := plainPrefix(s, i+1, len(s))
				n += int64(j-i) * 2
				i = j
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscapedASCII(dst, c)
			n += int64(escapeLen[c]) * 2
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += utf16Width(r)
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...), n
}

// AppendEscapedTwice appends, for an ASCII s, AppendEscaped of
// AppendEscaped(s): the body of a JSON string whose text is the body of
// s's JSON string. That is what a channel/frame's data holds for the
// part of a logical message that carries s as a JSON string, so a Source
// that writes a message this way (Message.Escaped) spares every frame a
// pass over it. It returns EscapedLen(s), the UTF-16 size s adds to the
// message, and true; at the first byte of s that is not ASCII it stops
// and returns false, with dst holding a partial body to discard.
func AppendEscapedTwice(dst []byte, s string) (_ []byte, n16 int64, ascii bool) {
	dst, n, n16 := AppendEscapedTwicePrefix(dst, s, math.MaxInt64)
	if n < len(s) {
		return dst, 0, false
	}
	return dst, n16, true
}

// AppendEscapedTwicePrefix is AppendEscapedTwice of the longest prefix of
// s that adds at most budget UTF-16 bytes to its message (EscapedPrefix),
// in one pass: it returns the prefix's length n and that size. s must be
// ASCII; at a byte that is not, it stops as at the budget.
func AppendEscapedTwicePrefix(dst []byte, s string, budget int64) (_ []byte, n int, n16 int64) {
	start, i := 0, 0
	for i < len(s) {
		c := s[i]
		if safeByte[c] {
			limit := i + int(min((budget-n16)/2, int64(len(s)-i)))
			if limit == i {
				break
			}
			j := plainPrefix(s, i+1, limit)
			n16 += int64(j-i) * 2
			i = j
			continue
		}
		if c >= utf8.RuneSelf {
			break
		}
		w := int64(escapeLen[c]) * 2
		if n16+w > budget {
			break
		}
		dst = append(dst, s[start:i]...)
		dst = appendTwiceEscapedASCII(dst, c)
		n16 += w
		i++
		start = i
	}
	return append(dst, s[start:i]...), i, n16
}

// EscapedTextSize returns the UTF-16 size of a Message.Escaped's text:
// esc is AppendEscaped of an ASCII text without the control characters
// U+0000–U+001F, so each of its escapes is two bytes, '\\' '\\' or '\\' '"',
// for one character of the text, and every other byte is one.
func EscapedTextSize(esc string) int64 {
	return 2 * int64(len(esc)-escapes(esc))
}

// escapes counts the escapes in esc, the body of a JSON string of ASCII
// without control characters: each is '\\' '\\' or '\\' '"', and a '"' appears only
// after its backslash.
func escapes(esc string) int {
	return (strings.Count(esc, `\`) + strings.Count(esc, `"`)) / 2
}

// appendTwiceEscapedASCII appends the escape of an ASCII byte c that is
// not written as itself, escaped again: its backslash doubled, and a
// quote or backslash after it escaped. It spells out what escaping
// appendEscapedASCII's output would give (TestAppendEscapedTwice checks
// every byte): derived at run time, terminal output with colours escaped
// a quarter slower.
func appendTwiceEscapedASCII(dst []byte, c byte) []byte {
	switch c {
	case '"':
		return append(dst, '\\', '\\', '\\', '"')
	case '\\':
		return append(dst, '\\', '\\', '\\', '\\')
	case '\n':
		return append(dst, '\\', '\\', 'n')
	case '\r':
		return append(dst, '\\', '\\', 'r')
	case '\t':
		return append(dst, '\\', '\\', 't')
	case '\b':
		return append(dst, '\\', '\\', 'b')
	case '\f':
		return append(dst, '\\', '\\', 'f')
	}
	return append(dst, '\\', '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

func appendEscapedASCII(dst []byte, c byte) []byte {
	if e := shortEscape[c]; e != 0 {
		return append(dst, '\\', e)
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// EscapedPrefix returns the length in bytes of the longest prefix of s
// whose JSON string body, as AppendEscaped writes it, is at most budget
// UTF-16 bytes, and that size. It never splits a UTF-8 sequence, so the
// prefix's body is the start of the whole string's body: a message cut
// to a size escapes the prefix with AppendEscaped and goes on from byte n
// later. It does not allocate.
func EscapedPrefix(s string, budget int64) (n int, size int64) {
	i := 0
	for i < len(s) {
		// A byte at a time: the pieces of terminal output between
		// escapes are short, and a word-at-a-time scan (plainPrefix)
		// costs more than it saves on them.
		c := s[i]
		if c < utf8.RuneSelf {
			w := int64(escapeLen[c]) * 2
			if size+w > budget {
				break
			}
			size += w
			i++
			continue
		}
		r, k := utf8.DecodeRuneInString(s[i:])
		w := utf16Width(r) // an invalid byte travels as U+FFFD
		if size+w > budget {
			break
		}
		size += w
		i += k
	}
	return i, size
}

// EscapedLen returns the size in UTF-16 bytes of the JSON string body that
// AppendJSONString writes for s, quotes excluded. Escapes are ASCII, so
// each escaped character counts 2 per output character. It does not
// allocate.
func EscapedLen(s string) int64 {
	var n int64
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeByte[c] {
				j := plainPrefix(s, i+1, len(s))
				n += int64(j-i) * 2
				i = j
				continue
			}
			n += int64(escapeLen[c]) * 2
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += utf16Width(r)
		i += size
	}
	return n
}
