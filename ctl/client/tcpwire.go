package client

import (
	"strconv"

	"github.com/ahp-dev/ahpd/internal/b64"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// The tcp/input text (PROTOCOL.md §8); data is standard padded base64.
const (
	tcpInputPrefix = `{"jsonrpc":"2.0","method":"tcp/input","params":{"offset":`
	tcpInputMiddle = `,"data":"`
	tcpInputSuffix = `"}}`
	// tcpInputOverhead is the envelope's length with the longest offset.
	tcpInputOverhead = len(tcpInputPrefix) + 16 + len(tcpInputMiddle) + len(tcpInputSuffix)
)

// appendTCPInput appends a tcp/input message carrying data at off, and
// returns where in dst its base64 is (nothing there needs escaping).
func appendTCPInput(dst []byte, off int64, data []byte) ([]byte, [2]int) {
	dst = append(dst, tcpInputPrefix...)
	dst = strconv.AppendInt(dst, off, 10)
	dst = append(dst, tcpInputMiddle...)
	from := len(dst)
	dst = b64.AppendEncode(dst, data)
	plain := [2]int{from, len(dst)}
	return append(dst, tcpInputSuffix...), plain
}

// tcpInputBytes returns how many data bytes a tcp/input of at most
// msgBytes UTF-16 bytes carries (all its characters are ASCII: 2 bytes
// each; base64 takes 4 characters per 3 bytes).
func tcpInputBytes(msgBytes int64) int {
	chars := int(msgBytes/2) - tcpInputOverhead
	return max(chars/4*3, 3)
}

// parseTCPData decodes tcp/data params {offset, data}.
func parseTCPData(dst, params []byte) (int64, []byte, error) {
	return wire.DecodeTCPDataInto(dst, "tcp/data", params)
}

// parseOffset decodes the offset of tcp/eof params.
func parseOffset(params []byte) (int64, error) { return wire.DecodeTCPOffset("tcp/eof", params) }
