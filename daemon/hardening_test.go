package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/flow"
)

// rawInit opens a raw WebSocket and initializes it with token.
func (h *harness) rawInit(token string) *websocket.Conn {
	h.t.Helper()
	ws, _, err := h.raw(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { ws.CloseNow() })
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"ahp/1","token":` + jsonString(token) + `,"client":{"name":"t","version":"0"}}}`
	if err := ws.Write(ctxT(h.t), websocket.MessageText, []byte(init)); err != nil {
		h.t.Fatal(err)
	}
	if got := readJSON(h.t, ws); !strings.Contains(got, `"result"`) {
		h.t.Fatalf("initialize: %s", got)
	}
	return ws
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

type rpcReply struct {
	ID    int `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends one request and returns its error reply (nil on a result).
func call(t *testing.T, ws *websocket.Conn, msg string) rpcReply {
	t.Helper()
	if err := ws.Write(ctxT(t), websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	for range 1000 { // frames of a subscription may come first
		got := readJSON(t, ws)
		var r struct {
			rpcReply
			Method string `json:"method"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil {
			t.Fatalf("reply %s: %v", got, err)
		}
		if r.Method == "" {
			return r.rpcReply
		}
	}
	t.Fatal("no reply among 1000 messages")
	return rpcReply{}
}

// TestLongIDsAndBoundedErrorMessages: a subscription id or channel longer
// than maxIdLength gets -32600 on every method that takes one, and no
// error message repeats unbounded client input (issue 12 §5).
func TestLongIDsAndBoundedErrorMessages(t *testing.T) {
	h := start(t, false, nil)
	ch, _ := h.term("t1")
	ws := h.rawInit(adminToken)
	long := strings.Repeat("x", 2000)
	sub := call(t, ws, `{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"channel":`+jsonString(ch.URI)+`}}`)
	if sub.Error != nil {
		t.Fatalf("subscribe: %+v", sub.Error)
	}
	const bound = 300 // bytes of message; the ids below are 2,000
	for _, c := range []struct{ name, msg string }{
		{"unsubscribe", `{"jsonrpc":"2.0","id":2,"method":"unsubscribe","params":{"subscriptionId":"` + long + `"}}`},
		{"unsubscribe channel", `{"jsonrpc":"2.0","id":2,"method":"unsubscribe","params":{"subscriptionId":"s1","channel":"` + long + `"}}`},
		{"terminal/resize", `{"jsonrpc":"2.0","id":2,"method":"terminal/resize","params":{"subscriptionId":"` + long + `","rows":10,"cols":10}}`},
		{"channel/credit", `{"jsonrpc":"2.0","id":2,"method":"channel/credit","params":{"subscriptionId":"` + long + `","consumedBytes":1}}`},
		{"channel/reset", `{"jsonrpc":"2.0","id":2,"method":"channel/reset","params":{"subscriptionId":"` + long + `"}}`},
		{"subscribe", `{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{"channel":"` + long + `"}}`},
	} {
		r := call(t, ws, c.msg)
		if r.Error == nil || r.Error.Code != flow.ErrCodeInvalidRequest {
			t.Errorf("%s with a 2,000-byte id: %+v, want -32600", c.name, r.Error)
		} else if len(r.Error.Message) > bound {
			t.Errorf("%s: message of %d bytes", c.name, len(r.Error.Message))
		}
	}
	// Errors that quote client input quote a bounded piece of it.
	for _, c := range []struct {
		name, msg string
		code      int
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"` + long + `"}`, flow.ErrCodeMethodNotFound},
		{"unknown subscription", `{"jsonrpc":"2.0","id":3,"method":"unsubscribe","params":{"subscriptionId":"` + long[:900] + `"}}`, flow.ErrCodeUnknownSubscriber},
		{"unknown channel", `{"jsonrpc":"2.0","id":3,"method":"subscribe","params":{"channel":"ahp-terminal:/` + long[:900] + `"}}`, flow.ErrCodeChannelNotFound},
		{"huge number", `{"jsonrpc":"2.0","id":3,"method":"terminal/resize","params":{"subscriptionId":"s1","rows":` + strings.Repeat("9", 5000) + `,"cols":1}}`, flow.ErrCodeInvalidParams},
		{"wrong type", `{"jsonrpc":"2.0","id":3,"method":"subscribe","params":{"channel":` + strings.Repeat("1", 5000) + `}}`, flow.ErrCodeInvalidParams},
	} {
		r := call(t, ws, c.msg)
		if r.Error == nil || r.Error.Code != c.code {
			t.Errorf("%s: %+v, want %d", c.name, r.Error, c.code)
		} else if len(r.Error.Message) > bound || strings.Contains(r.Error.Message, strings.Repeat("x", 100)) || strings.Contains(r.Error.Message, strings.Repeat("9", 300)) {
			t.Errorf("%s: message echoes the input (%d bytes): %.120s…", c.name, len(r.Error.Message), r.Error.Message)
		}
	}
	// The connection is still good.
	if r := call(t, ws, `{"jsonrpc":"2.0","id":4,"method":"channels/list","params":{}}`); r.Error != nil {
		t.Fatalf("channels/list after: %+v", r.Error)
	}
}

// TestOutOfScopeChannelHidesExistence: a scoped credential gets the same
// answer for a channel outside its scope whether the channel exists or
// not (issue 12 §5).
func TestOutOfScopeChannelHidesExistence(t *testing.T) {
	h := start(t, false, nil)
	a, _ := h.term("a")
	b, _ := h.term("b")
	view, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{a.URI}, Role: auth.RoleView})
	ws := h.rawInit(view)
	exists := call(t, ws, `{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"channel":`+jsonString(b.URI)+`}}`)
	missing := call(t, ws, `{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"channel":"ahp-terminal:/nope"}}`)
	if exists.Error == nil || missing.Error == nil || *exists.Error != *missing.Error {
		t.Fatalf("existing channel out of scope: %+v; missing one: %+v; want the same error", exists.Error, missing.Error)
	}
	if exists.Error.Code != flow.ErrCodeForbidden {
		t.Fatalf("out of scope: %+v, want -32003", exists.Error)
	}
	// In scope, a missing channel is still "not found".
	if err := h.srv.CloseChannel(a.URI); err != nil {
		t.Fatal(err)
	}
	if r := call(t, ws, `{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{"channel":`+jsonString(a.URI)+`}}`); r.Error == nil || r.Error.Code != flow.ErrCodeChannelNotFound {
		t.Fatalf("closed channel in scope: %+v, want -32002", r.Error)
	}
}

// TestDuplicateMembersRefused: a request whose object holds a member
// twice (which a decoder resolves by keeping the last, another reader
// perhaps the first) is refused with -32600, before initialize and
// after; an error message that quotes a client's string escapes its
// control characters.
func TestDuplicateMembersRefused(t *testing.T) {
	h := start(t, false, nil)
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send := func(s string) {
		t.Helper()
		if err := ws.Write(ctxT(t), websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"` + adminToken + `","client":{"name":"t","version":"0"}}}`)
	if got := readJSON(t, ws); !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize: %s", got)
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"channels/list","method":"channels/create","params":{}}`)
	if got := readJSON(t, ws); !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, `\"method\" appears twice`) {
		t.Fatalf("duplicate method: %s, want -32600 naming the member", got)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{"channel":"ahp-terminal:/x","channel":"ahp-terminal:/y"}}`)
	if got := readJSON(t, ws); !strings.Contains(got, `"code":-32600`) {
		t.Fatalf("duplicate params member: %s, want -32600", got)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"subscribe","params":{"channel":"ahp-terminal:/\u001b[2J"}}`)
	if got := readJSON(t, ws); strings.Contains(got, `\u001b`) || !strings.Contains(got, `\\x1b`) {
		t.Fatalf("an error quoting a control character: %s, want it escaped as \\x1b", got)
	}
	// Before initialize, a duplicate member refuses the initialize.
	ws2, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws2.CloseNow()
	if err := ws2.Write(ctxT(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","method":"initialize","params":{"protocolVersion":"ahp/1","token":"`+adminToken+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := readJSON(t, ws2); strings.Contains(got, `"result"`) {
		t.Fatalf("an initialize with a duplicate member succeeded: %s", got)
	}
}

// TestUnknownKindMethodNotFound: a method with a "/" whose kind does not
// exist is -32601 method not found, whatever its params (PROTOCOL.md §7;
// issue 39), while an unknown subscription of a real kind stays -32005.
func TestUnknownKindMethodNotFound(t *testing.T) {
	h := start(t, false, nil)
	ws := h.rawInit(adminToken)
	for _, c := range []struct {
		msg  string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ahpConformance/noSuchMethod","params":{"x":1}}`, flow.ErrCodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":2,"method":"ahpConformance/noSuchMethod","params":{"subscriptionId":"s1","channel":"ahp-terminal:/x"}}`, flow.ErrCodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":3,"method":"channel/nope","params":{}}`, flow.ErrCodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":4,"method":"/","params":{}}`, flow.ErrCodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":5,"method":"terminal/resize","params":{"subscriptionId":"nope","rows":1,"cols":1}}`, flow.ErrCodeUnknownSubscriber},
	} {
		if r := call(t, ws, c.msg); r.Error == nil || r.Error.Code != c.code {
			t.Errorf("%s: %+v, want %d", c.msg, r.Error, c.code)
		}
	}
}
