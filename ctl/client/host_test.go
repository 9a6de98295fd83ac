package client

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// hostRequest is a request as fakeHost hands it to its answer function.
type hostRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// fakeHost serves a WebSocket host (subprotocol ahp.v1) that answers each
// request with the response member answer returns for it (`"result":…` or
// `"error":…`; reading on also answers pings), and returns its ws:// URL.
// The server is closed when the test ends.
func fakeHost(t *testing.T, answer func(hostRequest) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"ahp.v1"}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			_, data, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			var req hostRequest
			if json.Unmarshal(data, &req) != nil {
				return
			}
			if ws.Write(r.Context(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,`+answer(req)+`}`)) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}
