package flow

import "strconv"

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
