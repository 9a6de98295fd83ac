package flow

import (
	"bytes"
	"strconv"
)

// The two channel notifications that travel outside frames, on the
// control lane (PROTOCOL.md §4): channel/credit (§5) and channel/reset
// (§7). Both ends of a connection write them with these encoders, so the
// bytes are the same whoever sends them. Strings are written with
// AppendJSONString.

// AppendCredit appends channel/credit {channel, subscriptionId,
// consumedBytes} (PROTOCOL.md §5) to dst and returns the extended buffer.
// consumedBytes is written as it is: a receiver's cumulative position,
// which stays below 2^53.
func AppendCredit(dst []byte, channel, subscriptionID string, consumedBytes int64) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":`...)
	dst = AppendJSONString(dst, channel)
	dst = append(dst, `,"subscriptionId":`...)
	dst = AppendJSONString(dst, subscriptionID)
	dst = append(dst, `,"consumedBytes":`...)
	dst = strconv.AppendInt(dst, consumedBytes, 10)
	return append(dst, `}}`...)
}

// AppendWindow appends channel/window {channel, subscriptionId,
// windowBytes} (PROTOCOL.md §6, "Changing a window") to dst and returns
// the extended buffer.
func AppendWindow(dst []byte, channel, subscriptionID string, windowBytes int64) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"channel/window","params":{"channel":`...)
	dst = AppendJSONString(dst, channel)
	dst = append(dst, `,"subscriptionId":`...)
	dst = AppendJSONString(dst, subscriptionID)
	dst = append(dst, `,"windowBytes":`...)
	dst = strconv.AppendInt(dst, windowBytes, 10)
	return append(dst, `}}`...)
}

// ParseCredit reads a channel/credit in the shape AppendCredit writes —
// that byte sequence exactly, both strings ASCII with nothing to escape,
// consumedBytes a non-negative integer of at most 16 digits without
// leading zeros — without encoding/json: credit is the most frequent
// message a receiver sends. ok is false for any other text, which may
// still be a valid channel/credit for encoding/json to read; when ok,
// encoding/json reads the same values. channel and subscriptionID alias
// b.
func ParseCredit(b []byte) (channel, subscriptionID []byte, consumedBytes int64, ok bool) {
	const head, mid, tail, end = `{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":"`, `","subscriptionId":"`, `","consumedBytes":`, `}}`
	rest, ok := bytes.CutPrefix(b, []byte(head))
	if !ok {
		return nil, nil, 0, false
	}
	channel, rest, ok = cutPlainString(rest, mid)
	if !ok {
		return nil, nil, 0, false
	}
	subscriptionID, rest, ok = cutPlainString(rest, tail)
	if !ok {
		return nil, nil, 0, false
	}
	digits, ok := bytes.CutSuffix(rest, []byte(end))
	if !ok || len(digits) == 0 || len(digits) > 16 || (digits[0] == '0' && len(digits) > 1) {
		return nil, nil, 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return nil, nil, 0, false
		}
		consumedBytes = consumedBytes*10 + int64(c-'0')
	}
	return channel, subscriptionID, consumedBytes, true
}

// cutPlainString returns b up to the first '"', which must begin sep,
// and what follows sep; the string must be printable ASCII without '\\'.
func cutPlainString(b []byte, sep string) (s, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '"')
	if i < 0 || !bytes.HasPrefix(b[i:], []byte(sep)) {
		return nil, nil, false
	}
	for _, c := range b[:i] {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return nil, nil, false
		}
	}
	return b[:i], b[i+len(sep):], true
}

// AppendReset appends channel/reset {channel, subscriptionId, code,
// message} (PROTOCOL.md §7) to dst and returns the extended buffer. code
// is one of the §7 codes (ResetCode, CodeChannelClosed, …); message is
// written whole: a caller that passes text from elsewhere bounds it first.
func AppendReset(dst []byte, channel, subscriptionID, code, message string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"channel/reset","params":{"channel":`...)
	dst = AppendJSONString(dst, channel)
	dst = append(dst, `,"subscriptionId":`...)
	dst = AppendJSONString(dst, subscriptionID)
	dst = append(dst, `,"code":`...)
	dst = AppendJSONString(dst, code)
	dst = append(dst, `,"message":`...)
	dst = AppendJSONString(dst, message)
	return append(dst, `}}`...)
}
