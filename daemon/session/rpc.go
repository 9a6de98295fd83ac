package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ahp-dev/ahpd/flow"
)

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return e.Message }

// maxErrorMessage bounds an error message on the wire: messages may wrap
// decoder errors, which can quote the client's input (a JSON number's
// literal, for one), and none may echo it unbounded.
const maxErrorMessage = 256

func rpcErr(code int, msg string) *RPCError {
	return &RPCError{Code: code, Message: boundMessage(msg)}
}

// boundMessage cuts msg to maxErrorMessage bytes at a UTF-8 boundary,
// with control characters written as escapes: messages may quote a
// client's strings, and a CLI prints them on a terminal.
func boundMessage(msg string) string {
	msg = escapeControls(msg)
	if len(msg) <= maxErrorMessage {
		return msg
	}
	return Truncate(msg, maxErrorMessage-len("…")) + "…"
}

// escapeControls writes the C0 and C1 control characters and DEL of s as
// \xNN or \u00NN, so that an error message that quotes a client's string
// cannot move a terminal's cursor or start an escape sequence there.
func escapeControls(s string) string {
	clean := true
	for _, r := range s {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80 && isControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f }

// duplicateMember returns the first member name that an object in the
// JSON text b holds twice, at any depth, or "" (also for text that is not
// JSON: the decoder that follows reports that). Decoders keep the last of
// two members and other readers the first, so a request with one is
// ambiguous and refused (-32600). Names are compared without regard to
// case, as encoding/json matches them to the fields every request and its
// params decode into ("method" and "Method" set the same field).
func duplicateMember(b []byte) string {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	type object struct {
		keys  map[string]struct{}
		isKey bool // the next string token is a member name
	}
	var stack []*object
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil {
					top.isKey = true // the object was the member's value
				}
				stack = append(stack, &object{keys: map[string]struct{}{}, isKey: true})
				continue
			case '[':
				if top != nil {
					top.isKey = true
				}
				stack = append(stack, nil)
				continue
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return ""
				}
				continue
			}
		case string:
			if top != nil && top.isKey {
				k := strings.ToLower(v)
				if _, dup := top.keys[k]; dup {
					return v
				}
				top.keys[k] = struct{}{}
				top.isKey = false
				continue
			}
		}
		if top != nil {
			top.isKey = true // a scalar member value
		}
	}
}

// request is an inbound JSON-RPC message (request or notification).
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

func (r *request) isNotification() bool { return len(r.ID) == 0 }

// validID reports whether a JSON-RPC id is a string, number or null.
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return true
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// encodeResponse serializes a result or error response.
func encodeResponse(id json.RawMessage, result any, rerr *RPCError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, id...)
	if rerr != nil {
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(rerr.Code), 10)
		b = append(b, `,"message":`...)
		b = flow.AppendJSONString(b, rerr.Message)
		return append(b, `}}`...)
	}
	r, err := json.Marshal(result)
	if err != nil {
		return encodeResponse(id, nil, rpcErr(flow.ErrCodeInternal, "internal error"))
	}
	b = append(b, `,"result":`...)
	b = append(b, r...)
	return append(b, '}')
}
