package pty

import (
	"bytes"
	"encoding/binary"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// maxQueryLen bounds a sequence that is still considered a possible query
// (and so may be held back across reads), in bytes. Longer sequences are
// passed through untouched.
const maxQueryLen = 256

// query is a terminal query removed from the output (PROTOCOL.md §8).
type query struct {
	off int    // byte offset in the chunk text where it was removed
	raw string // the sequence as received, introducer and terminator included
}

// filter turns raw PTY reads into viewer text: it removes terminal queries
// (recording where they were, so the emulator can answer them at that point
// of the stream), holds back a possible query prefix at the end of a read
// until the next read (at most maxQueryLen bytes), and converts the rest to
// valid UTF-8 (an incomplete trailing sequence waits for the next read;
// invalid bytes become U+FFFD). Owned by the reader goroutine.
type filter struct {
	st        uint8  // parser state after the last processed byte
	holdSt    uint8  // parser state to resume from when hold is re-fed
	hold      []byte // raw bytes held back (≤ maxQueryLen+1)
	u8        []byte // incomplete UTF-8 tail held back (≤ 3 bytes)
	swallowST bool   // a query just ended at ESC: drop a following ESC '\'
	join      []byte // scratch: hold + new read
	raw       []byte // scratch: filtered raw bytes
	segs      []int  // scratch: offsets in raw where queries were removed
	out       []byte // scratch: sanitized text
}

// feed processes one read. final flushes everything held (end of stream).
// It returns the text for viewers, whether that text is ASCII (when it
// says so; a text it sanitized says false) and the queries removed from
// it.
func (f *filter) feed(p []byte, final bool) (string, bool, []query) {
	data := p
	if len(f.hold) > 0 {
		f.join = append(append(f.join[:0], f.hold...), p...)
		data = f.join
		f.hold = f.hold[:0]
		f.st = f.holdSt
	}
	raw := f.raw[:0]
	var qs []query
	f.segs = f.segs[:0]
	segStart := 0
	seqStart := -1
	var stBefore uint8
	removed := false
	remove := func(start, end int, q string, replacement string) {
		removed = true
		raw = append(raw, data[segStart:start]...)
		raw = append(raw, replacement...)
		f.segs = append(f.segs, len(raw))
		qs = append(qs, query{raw: q})
		segStart = end
	}
	holdFrom := -1
	escAt := -1 // the index of the next ESC at or after i, once looked up
	for i := 0; i < len(data); {
		if f.st == stGround && seqStart < 0 {
			// Skip to the next ESC or 0xC2 (the first byte of a C1
			// control in UTF-8): a few bytes one by one (escape-dense
			// output), then with the library's vectorized search.
			j, end := i, min(i+16, len(data))
			for j < end && data[j] != 0x1b && data[j] != 0xc2 {
				j++
			}
			if j == i+16 {
				if escAt < j {
					if escAt = bytes.IndexByte(data[j:], 0x1b); escAt < 0 {
						escAt = len(data)
					} else {
						escAt += j
					}
				}
				stop := escAt
				if k := bytes.IndexByte(data[j:escAt], 0xc2); k >= 0 {
					stop = j + k
				}
				j = stop
			}
			if j == len(data) {
				break
			}
			if data[j] == 0xc2 {
				if j+1 == len(data) {
					if !final {
						holdFrom, stBefore = j, f.st
					}
					break
				}
				if c := data[j+1]; c < 0x80 || c > 0x9f {
					i = j + 2
					continue
				}
			}
			i = j
		}
		// Classify one byte or C1 pair.
		b := data[i]
		cls, size := b, 1
		if b >= 0x80 {
			cls = clsHigh
			if b == 0xc2 {
				if i+1 == len(data) {
					if !final {
						if seqStart >= 0 {
							holdFrom = seqStart
						} else {
							holdFrom, stBefore = i, f.st
						}
					}
					break
				}
				if c := data[i+1]; c >= 0x80 && c <= 0x9f {
					cls, size = c, 2
				}
			}
		}
		v := vtTable[f.st][cls]
		act, next := uint8(v>>8), uint8(v)
		prev := f.st
		f.st = next
		end := i + size

		// A string ended by the ESC of its ST (or of the next sequence).
		if seqStart >= 0 && next == stEsc && (act == acOscEnd || act == acUnhook) {
			seq := data[seqStart:i]
			if q, repl, ok := classifyQuery(seq); ok {
				remove(seqStart, i, q, repl)
				f.swallowST = true
			}
			seqStart = -1
		}
		// ESC and the C1 introducers always start a new sequence.
		introducer := cls == 0x1b || cls == 0x9b || cls == 0x9d || cls == 0x90
		switch {
		case introducer:
			seqStart, stBefore = i, prev
		case seqStart < 0:
		case next == stGround:
			seq := data[seqStart:end]
			if !mayBeQuery(seq) {
				if f.swallowST && string(seq) == "\x1b\\" {
					remove(seqStart, end, "", "")
					qs = qs[:len(qs)-1]
					f.segs = f.segs[:len(f.segs)-1]
				}
			} else if q, repl, ok := classifyQuery(seq); ok {
				remove(seqStart, end, q, repl)
			} else if f.swallowST && string(seq) == "\x1b\\" {
				remove(seqStart, end, "", "")
				qs = qs[:len(qs)-1]
				f.segs = f.segs[:len(f.segs)-1]
			}
			f.swallowST = false
			seqStart = -1
		case end-seqStart > maxQueryLen,
			next == stSosPmApc, next == stEscInter, next == stCsiIgnore, next == stDcsIgnore,
			act == acHook && !bytes.HasSuffix(data[seqStart:end], []byte("$q")),
			next == stOsc && act == acOscPut && !oscMayQuery(data[seqStart:end]):
			seqStart = -1 // cannot be a query: pass it through
		}
		i = end
	}
	if holdFrom < 0 && seqStart >= 0 && !final {
		holdFrom = seqStart
	}
	end := len(data)
	if holdFrom >= 0 {
		end = holdFrom
	}
	if !removed {
		raw = data[:end] // nothing removed: no copy (f.raw keeps its buffer)
	} else {
		raw = append(raw, data[segStart:end]...)
		f.raw = raw
	}
	if holdFrom >= 0 {
		f.hold = append(f.hold[:0], data[holdFrom:]...)
		f.holdSt = stBefore
		f.st = stBefore
	}

	// UTF-8: each segment between removed queries is decoded on its own (a
	// removed query interrupts a sequence, as it would in the terminal);
	// only the very end may wait for the next read.
	out := f.out[:0]
	prev := 0
	for k, off := range f.segs {
		var seg []byte
		if k == 0 && len(f.u8) > 0 {
			seg = append(append([]byte(nil), f.u8...), raw[prev:off]...)
			f.u8 = f.u8[:0]
		} else {
			seg = raw[prev:off]
		}
		out = appendValidUTF8(out, seg)
		qs[k].off = len(out)
		prev = off
	}
	last := raw[prev:]
	if len(f.u8) > 0 {
		last = append(append([]byte(nil), f.u8...), last...)
		f.u8 = f.u8[:0]
	}
	if !final {
		if t := incompleteTail(last); t > 0 {
			f.u8 = append(f.u8, last[len(last)-t:]...)
			last = last[:len(last)-t]
		}
	}
	if len(out) == 0 {
		// The common case: one copy. ASCII is valid UTF-8, and the
		// viewers write an ASCII text's messages ready for their frames
		// (Message.Escaped).
		if isASCII(last) {
			return string(last), true, qs
		}
		if utf8.Valid(last) {
			return string(last), false, qs
		}
	}
	out = appendValidUTF8(out, last)
	f.out = out
	return string(out), false, qs
}

// isASCII reports whether every byte of p is below 0x80: whole 16-byte
// blocks first (asciiBlocks: vector instructions on amd64), then words
// and bytes.
func isASCII(p []byte) bool {
	if len(p) >= 16 {
		if !asciiBlocks(unsafe.SliceData(p), len(p)) {
			return false
		}
		p = p[len(p)&^15:]
	}
	return asciiWords(p)
}

// asciiWords is isASCII 8 bytes a step.
func asciiWords(p []byte) bool {
	for len(p) >= 8 {
		if binary.LittleEndian.Uint64(p)&0x8080808080808080 != 0 {
			return false
		}
		p = p[8:]
	}
	for _, c := range p {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// incompleteTail returns the length of a trailing incomplete (but so far
// valid) UTF-8 sequence in p, or 0.
func incompleteTail(p []byte) int {
	for k := 1; k <= 3 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c&0xC0 == 0x80 {
			continue // continuation byte
		}
		if c >= 0xC0 && !utf8.FullRune(p[len(p)-k:]) {
			return k
		}
		return 0
	}
	return 0
}

// appendValidUTF8 appends p with each invalid byte replaced by U+FFFD.
func appendValidUTF8(dst, p []byte) []byte {
	if utf8.Valid(p) {
		return append(dst, p...)
	}
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, p[:n]...)
		}
		p = p[n:]
	}
	return dst
}

// mayBeQuery is a cheap test that rules out most complete sequences (SGR,
// cursor motion, ...) before classifyQuery looks at them.
func mayBeQuery(seq []byte) bool {
	if len(seq) < 2 {
		return false
	}
	switch {
	case seq[0] == 0x1b && seq[1] == '[', seq[0] == 0xc2 && seq[1] == 0x9b:
		switch seq[len(seq)-1] {
		case 'c', 'n', 'p', 'q':
			return true
		}
		return false
	case seq[0] == 0x1b && (seq[1] == ']' || seq[1] == 'P'), seq[0] == 0xc2 && (seq[1] == 0x9d || seq[1] == 0x90):
		return true
	}
	return false
}

// oscMayQuery reports whether a partial OSC (introducer included) can still
// be a colour query: its number is 4, 10, 11 or 12.
func oscMayQuery(seq []byte) bool {
	s := string(seq[2:]) // both "ESC ]" and C1 "C2 9D" are two bytes
	i := strings.IndexByte(s, ';')
	if i < 0 {
		return len(s) <= 2
	}
	switch s[:i] {
	case "4", "10", "11", "12":
		return true
	}
	return false
}

// classifyQuery decides whether a complete sequence is a query the host
// answers (PROTOCOL.md §8). For an OSC that mixes colour settings with
// queries it returns the settings alone as a replacement for viewers.
func classifyQuery(seq []byte) (q string, replacement string, ok bool) {
	kind, body := splitIntro(string(seq))
	switch kind {
	case 'C':
		prefix, _, inter, final := parseCSI(body)
		for i := 0; i < len(body)-1; i++ {
			c := body[i]
			if !(c >= '0' && c <= '9' || c == ';' || c >= 0x3C && c <= 0x3F && i == 0 || c == '$') {
				return "", "", false
			}
		}
		switch {
		case final == 'c' && inter == 0 && (prefix == 0 || prefix == '>' || prefix == '='),
			final == 'n' && inter == 0 && (prefix == 0 || prefix == '?'),
			final == 'p' && inter == '$' && (prefix == 0 || prefix == '?'),
			final == 'q' && inter == 0 && prefix == '>':
			return string(seq), "", true
		}
	case 'P':
		if strings.HasPrefix(body, "$q") {
			return string(seq), "", true
		}
	case ']':
		term := ""
		switch {
		case strings.HasSuffix(body, "\x07"):
			body, term = body[:len(body)-1], "\x07"
		case strings.HasSuffix(body, "\u009c"):
			body, term = body[:len(body)-2], "\u009c"
		}
		parts := splitSemi(body)
		if len(parts) < 2 {
			return "", "", false
		}
		var sets []string
		queried := false
		switch parts[0] {
		case "4":
			for k := 1; k+1 < len(parts); k += 2 {
				if parts[k+1] == "?" {
					queried = true
				} else {
					sets = append(sets, parts[k], parts[k+1])
				}
			}
		case "10", "11", "12":
			n := int(parts[0][1] - '0')
			for k := 1; k < len(parts); k++ {
				if parts[k] == "?" {
					queried = true
				} else if n+k-1 <= 2 {
					sets = append(sets, "\x1b]1"+string(rune('0'+n+k-1))+";"+parts[k]+"\x07")
				}
			}
		}
		if !queried {
			return "", "", false
		}
		if term == "" {
			term = "\x07"
		}
		switch {
		case len(sets) == 0:
		case parts[0] == "4":
			replacement = "\x1b]4;" + strings.Join(sets, ";") + term
		default:
			replacement = strings.Join(sets, "")
		}
		return string(seq), replacement, true
	}
	return "", "", false
}
