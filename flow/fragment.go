package flow

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// The channel/frame envelope (PROTOCOL.md §4). Non-final frames omit
// "final"; the final frame ends with ,"final":true.
const (
	framePrefix1   = `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":`
	framePrefix2   = `,"subscriptionId":`
	framePrefix3   = `,"messageId":`
	framePrefix4   = `,"data":"`
	frameSuffix    = `"}}`
	frameSuffixFin = `","final":true}}`
	// maxCharCost is the largest UTF-16 size one input character can take
	// in a frame: a control character written as \u00XX (6 × 2 bytes).
	maxCharCost = 12
)

// ErrEnvelopeTooLarge means the frame envelope (channel and subscription
// ids, escaped) leaves no room for payload under maximumFrameBytes.
var ErrEnvelopeTooLarge = errors.New("flow: frame envelope leaves no room for data under maximumFrameBytes")

// safeByte[c] is true for a byte written as itself in a JSON string:
// printable ASCII other than '"' and '\\'.
var safeByte [256]bool

func init() {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		safeByte[c] = c != '"' && c != '\\'
	}
}

// Fragmenter turns one serialized logical message into channel/frame texts
// (PROTOCOL.md §4). Each frame, envelope and escaping included, fits
// maximumFrameBytes measured in UTF-16 bytes; frames are cut only at
// character boundaries, so no UTF-8 sequence and no surrogate pair is ever
// split. It works in one pass over the message: each character's escaped
// cost is known as it is copied, so nothing is serialized twice.
//
// A Fragmenter is not safe for concurrent use. Its zero value is ready for
// Reset.
type Fragmenter struct {
	msg      string
	off      int
	head     []byte // envelope up to and including `"data":"`
	headSize int64  // UTF-16 bytes of head
	budget   int64  // UTF-16 bytes available for the escaped data body
	started  bool
	// msg[plainLo:plainHi] is known to need no escaping (Plain).
	plainLo, plainHi int
	// escaped: msg is the frames' data already (ResetEscaped).
	escaped bool
}

// Reset prepares f to fragment msg as message id on the given channel and
// subscription, under maxFrameBytes. It fails with ErrEnvelopeTooLarge
// when the ids are too long for any payload to fit.
func (f *Fragmenter) Reset(channel, subscriptionID string, id int64, msg string, maxFrameBytes int64) error {
	h := f.head[:0]
	h = append(h, framePrefix1...)
	h = AppendJSONString(h, channel)
	h = append(h, framePrefix2...)
	h = AppendJSONString(h, subscriptionID)
	h = append(h, framePrefix3...)
	h = strconv.AppendInt(h, id, 10)
	h = append(h, framePrefix4...)
	f.head = h
	// The head is valid UTF-8 (AppendJSONString guarantees it), so its
	// UTF-16 size is UTF16Len of its text. The final suffix is always
	// reserved: it costs 26 bytes at most and keeps the pass single.
	f.headSize = utf16LenBytes(h)
	f.budget = maxFrameBytes - f.headSize - 2*int64(len(frameSuffixFin))
	f.msg, f.off, f.started = msg, 0, false
	f.plainLo, f.plainHi = 0, 0
	f.escaped = false
	if f.budget < maxCharCost {
		return ErrEnvelopeTooLarge
	}
	return nil
}

// ResetEscaped is Reset for a message given as the body of its JSON
// string, esc (Message.Escaped: AppendEscaped of an ASCII text without
// control characters). Its frames are, byte for byte, the ones Reset
// makes of that text, but each is a copy of a piece of esc, cut between its
// escapes, and no byte is looked at but for counting the escapes.
func (f *Fragmenter) ResetEscaped(channel, subscriptionID string, id int64, esc string, maxFrameBytes int64) error {
	err := f.Reset(channel, subscriptionID, id, esc, maxFrameBytes)
	f.escaped = true
	return err
}

// Plain tells f that msg[from:to] of the message given to Reset is
// printable ASCII other than '"' and '\\' (Message.PlainFrom, PlainTo),
// so that span is copied without being scanned. A span outside the
// message is ignored; a span that breaks the promise makes frames that
// are not JSON.
func (f *Fragmenter) Plain(from, to int) {
	if 0 <= from && from < to && to <= len(f.msg) {
		f.plainLo, f.plainHi = from, to
	}
}

// Done reports whether the final frame has been produced.
func (f *Fragmenter) Done() bool { return f.started && f.off >= len(f.msg) }

// Next appends the next frame to dst and returns it with the frame's
// payload size (UTF-16 bytes of its decoded data) and whether it is the
// final frame. Calling Next after the final frame returns dst unchanged
// and final true with zero payload.
func (f *Fragmenter) Next(dst []byte) (frame []byte, payload int64, final bool) {
	return f.next(dst, math.MaxInt64)
}

// minFrame returns the UTF-16 size of the smallest frame next can cut
// with progress: the envelope and the costliest character.
func (f *Fragmenter) minFrame() int64 {
	return f.headSize + 2*int64(len(frameSuffixFin)) + maxCharCost
}

// next is Next with the frame further capped at maxFrame UTF-16 bytes,
// which must be at least minFrame() (the Sender's transport room).
func (f *Fragmenter) next(dst []byte, maxFrame int64) (frame []byte, payload int64, final bool) {
	if f.Done() {
		return dst, 0, true
	}
	f.started = true
	dst = append(dst, f.head...)
	if f.escaped {
		return f.nextEscaped(dst, maxFrame)
	}
	s := f.msg
	i := f.off
	// run is the start of the bytes already accepted but not yet copied:
	// plain ASCII and valid multi-byte sequences are copied in bulk.
	run := i
	left := min(f.budget, maxFrame-f.headSize-2*int64(len(frameSuffixFin)))
	for i < len(s) {
		c := s[i]
		if safeByte[c] {
			// The longest run of plain ASCII that fits, 8 bytes at a time.
			limit := i + int(min(left/2, int64(len(s)-i)))
			if limit == i {
				break // no room for even one byte
			}
			var j int
			if i >= f.plainLo && i < f.plainHi {
				j = min(limit, f.plainHi) // known plain: not scanned
				j = plainPrefix(s, j, limit)
			} else {
				j = plainPrefix(s, i+1, limit)
			}
			left -= int64(j-i) * 2
			payload += int64(j-i) * 2
			i = j
			continue
		}
		if c < utf8.RuneSelf {
			cost := int64(escapeLen[c]) * 2
			if cost > left {
				break
			}
			dst = append(dst, s[run:i]...)
			dst = appendEscapedASCII(dst, c)
			left -= cost
			payload += 2
			i++
			run = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		w := utf16Width(r)
		if w > left {
			break
		}
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[run:i]...)
			dst = append(dst, "\uFFFD"...)
			run = i + 1
		}
		left -= w
		payload += w
		i += size
	}
	dst = append(dst, s[run:i]...)
	f.off = i
	if i >= len(s) {
		return append(dst, frameSuffixFin...), payload, true
	}
	return append(dst, frameSuffix...), payload, false
}

// nextEscaped is next for ResetEscaped, dst holding the head: as many
// bytes of the body as the frame has room for, at 2 UTF-16 bytes each
// (ASCII), less one when the cut would split an escape (an odd run of
// backslashes before it: pairs start at the piece's start, which is a
// cut between escapes itself). The text's characters in it are its bytes
// less one per escape.
func (f *Fragmenter) nextEscaped(dst []byte, maxFrame int64) (frame []byte, payload int64, final bool) {
	left := min(f.budget, maxFrame-f.headSize-2*int64(len(frameSuffixFin)))
	s := f.msg[f.off:]
	n := int(min(left/2, int64(len(s))))
	if n < len(s) {
		k := n
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		n -= (n - k) % 2
	}
	piece := s[:n]
	dst = append(dst, piece...)
	f.off += n
	payload = 2 * int64(n-escapes(piece))
	if f.off >= len(f.msg) {
		return append(dst, frameSuffixFin...), payload, true
	}
	return append(dst, frameSuffix...), payload, false
}

// utf16LenBytes is UTF16Len for a byte slice.
func utf16LenBytes(b []byte) int64 {
	var n int64
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			n += 2
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		n += utf16Width(r)
		i += size
	}
	return n
}
