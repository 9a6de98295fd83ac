package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/ahp-dev/ahpd/internal/b64"
)

// The params of tcp/data and tcp/input are {offset, data}, data standard
// padded base64 (PROTOCOL.md §8); those of tcp/eof are {offset}. Both
// ends decode them here: the canonical shape both ends write is sliced
// without encoding/json (a message of base64 cost as much to validate as
// everything else on the path), any other is decoded by encoding/json.

// DecodeTCPData decodes {offset, data} params of method (for its errors).
func DecodeTCPData(method string, params []byte) (int64, []byte, error) {
	return DecodeTCPDataInto(nil, method, params)
}

// DecodeTCPDataInto is DecodeTCPData decoding data over dst's memory
// (from dst[0], not after its contents) when it is large enough, so a
// caller can reuse one buffer message after message.
func DecodeTCPDataInto(dst []byte, method string, params []byte) (int64, []byte, error) {
	const head, mid, tail = `{"offset":`, `,"data":"`, `"}`
	if rest, ok := bytes.CutPrefix(params, []byte(head)); ok {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i > 0 && i <= 16 && (rest[0] != '0' || i == 1) { // JSON has no leading zeros
			if body, ok := bytes.CutPrefix(rest[i:], []byte(mid)); ok && bytes.HasSuffix(body, []byte(tail)) {
				body = body[:len(body)-len(tail)]
				// No scan for '\\' and '"' first: the decoder refuses
				// both (neither is a base64 character), and anything it
				// refuses (an escape such as \/, which JSON allows, or
				// more members after data) goes to the slow path below,
				// which decides. It skips \r and \n, which a JSON string
				// may not hold raw: decoded short of the body's length,
				// the slow path says which is wrong.
				if data, err := b64.AppendDecode(dst[:0], body); err == nil && len(body)%4 == 0 && len(data) == decodedLen(body) {
					off, _ := strconv.ParseInt(string(rest[:i]), 10, 64)
					return off, data, nil
				}
			}
		}
	}
	var p struct {
		Offset *int64  `json:"offset"`
		Data   *string `json:"data"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", method, err)
	}
	if p.Offset == nil || *p.Offset < 0 || p.Data == nil {
		return 0, nil, fmt.Errorf("%s: params need a non-negative offset and data", method)
	}
	data, err := base64.StdEncoding.DecodeString(*p.Data)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: data is not standard padded base64: %w", method, err)
	}
	return *p.Offset, data, nil
}

// DecodeTCPOffset decodes {offset} params of method (tcp/eof).
func DecodeTCPOffset(method string, params []byte) (int64, error) {
	var p struct {
		Offset *int64 `json:"offset"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return 0, fmt.Errorf("%s: %w", method, err)
	}
	if p.Offset == nil || *p.Offset < 0 {
		return 0, errors.New(method + ": params need a non-negative offset")
	}
	return *p.Offset, nil
}

// decodedLen is the length padded base64 text b decodes to when it holds
// nothing but base64 characters.
func decodedLen(b []byte) int {
	n := len(b) / 4 * 3
	if len(b) > 0 && b[len(b)-1] == '=' {
		n--
	}
	if len(b) > 1 && b[len(b)-2] == '=' {
		n--
	}
	return n
}
