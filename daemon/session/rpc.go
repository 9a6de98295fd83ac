package session

import (
	"encoding/json"
	"strconv"

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

// boundMessage cuts msg to maxErrorMessage bytes at a UTF-8 boundary.
func boundMessage(msg string) string {
	if len(msg) <= maxErrorMessage {
		return msg
	}
	return Truncate(msg, maxErrorMessage-len("…")) + "…"
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
