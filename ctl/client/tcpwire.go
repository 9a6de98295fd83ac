package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The tcp/input text (PROTOCOL.md §8); data is standard padded base64.
const (
	tcpInputPrefix = `{"jsonrpc":"2.0","method":"tcp/input","params":{"offset":`
	tcpInputMiddle = `,"data":"`
	tcpInputSuffix = `"}}`
	// tcpInputOverhead is the envelope's length with the longest offset.
	tcpInputOverhead = len(tcpInputPrefix) + 16 + len(tcpInputMiddle) + len(tcpInputSuffix)
)

// appendTCPInput appends a tcp/input message carrying data at off.
func appendTCPInput(dst []byte, off int64, data []byte) []byte {
	dst = append(dst, tcpInputPrefix...)
	dst = strconv.AppendInt(dst, off, 10)
	dst = append(dst, tcpInputMiddle...)
	dst = base64.StdEncoding.AppendEncode(dst, data)
	return append(dst, tcpInputSuffix...)
}

// tcpInputBytes returns how many data bytes a tcp/input of at most
// msgBytes UTF-16 bytes carries (all its characters are ASCII: 2 bytes
// each; base64 takes 4 characters per 3 bytes).
func tcpInputBytes(msgBytes int64) int {
	chars := int(msgBytes/2) - tcpInputOverhead
	return max(chars/4*3, 3)
}

// parseTCPData decodes tcp/data params {offset, data}. The host's
// canonical shape is sliced without encoding/json; anything else goes
// through it.
func parseTCPData(params []byte) (int64, []byte, error) {
	const head, mid, tail = `{"offset":`, `,"data":"`, `"}`
	if rest, ok := bytes.CutPrefix(params, []byte(head)); ok {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i > 0 && i <= 16 && (rest[0] != '0' || i == 1) { // JSON has no leading zeros
			if body, ok := bytes.CutPrefix(rest[i:], []byte(mid)); ok && bytes.HasSuffix(body, []byte(tail)) {
				body = body[:len(body)-len(tail)]
				if bytes.IndexByte(body, '\\') < 0 && bytes.IndexByte(body, '"') < 0 {
					off, _ := strconv.ParseInt(string(rest[:i]), 10, 64)
					data := make([]byte, base64.StdEncoding.DecodedLen(len(body)))
					n, err := base64.StdEncoding.Decode(data, body)
					if err != nil {
						return 0, nil, fmt.Errorf("tcp/data: data is not standard padded base64: %w", err)
					}
					return off, data[:n], nil
				}
			}
		}
	}
	var p struct {
		Offset *int64  `json:"offset"`
		Data   *string `json:"data"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return 0, nil, fmt.Errorf("tcp/data: %w", err)
	}
	if p.Offset == nil || *p.Offset < 0 || p.Data == nil {
		return 0, nil, errors.New("tcp/data: params need a non-negative offset and data")
	}
	data, err := base64.StdEncoding.DecodeString(*p.Data)
	if err != nil {
		return 0, nil, fmt.Errorf("tcp/data: data is not standard padded base64: %w", err)
	}
	return *p.Offset, data, nil
}

// parseOffset decodes the offset of tcp/eof params.
func parseOffset(params []byte) (int64, error) {
	var p struct {
		Offset *int64 `json:"offset"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return 0, fmt.Errorf("tcp/eof: %w", err)
	}
	if p.Offset == nil || *p.Offset < 0 {
		return 0, errors.New("tcp/eof: params need a non-negative offset")
	}
	return *p.Offset, nil
}
