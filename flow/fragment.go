package flow

import (
	"errors"
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
	msg     string
	off     int
	head    []byte // envelope up to and including `"data":"`
	budget  int64  // UTF-16 bytes available for the escaped data body
	started bool
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
	f.budget = maxFrameBytes - utf16LenBytes(h) - 2*int64(len(frameSuffixFin))
	f.msg, f.off, f.started = msg, 0, false
	if f.budget < maxCharCost {
		return ErrEnvelopeTooLarge
	}
	return nil
}

// Done reports whether the final frame has been produced.
func (f *Fragmenter) Done() bool { return f.started && f.off >= len(f.msg) }

// Remaining returns the unsent part of the message.
func (f *Fragmenter) Remaining() string { return f.msg[f.off:] }

// Next appends the next frame to dst and returns it with the frame's
// payload size (UTF-16 bytes of its decoded data) and whether it is the
// final frame. Calling Next after the final frame returns dst unchanged
// and final true with zero payload.
func (f *Fragmenter) Next(dst []byte) (frame []byte, payload int64, final bool) {
	if f.Done() {
		return dst, 0, true
	}
	f.started = true
	dst = append(dst, f.head...)
	s := f.msg
	i := f.off
	var used int64
	budget := f.budget
	for i < len(s) {
		c := s[i]
		if safeByte[c] {
			// Copy the longest run of plain ASCII that fits.
			limit := i + int((budget-used)/2)
			if limit > len(s) {
				limit = len(s)
			}
			j := i + 1
			for j < limit && safeByte[s[j]] {
				j++
			}
			if j > limit { // no room for even one byte
				break
			}
			dst = append(dst, s[i:j]...)
			used += int64(j-i) * 2
			payload += int64(j-i) * 2
			i = j
			continue
		}
		if c < utf8.RuneSelf {
			cost := int64(escapeLen[c]) * 2
			if used+cost > budget {
				break
			}
			dst = appendEscapedASCII(dst, c)
			used += cost
			payload += 2
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		w := utf16Width(r)
		if used+w > budget {
			break
		}
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		used += w
		payload += w
		i += size
	}
	f.off = i
	if i >= len(s) {
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
