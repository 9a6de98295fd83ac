package client

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// smallWritesSlow delays the writes shorter than 32 bytes (a WebSocket
// ping's frame; the upgrade request and initialize are longer).
type smallWritesSlow struct{ net.Conn }

func (c smallWritesSlow) Write(b []byte) (int, error) {
	if len(b) < 32 {
		time.Sleep(60 * time.Millisecond)
	}
	return c.Conn.Write(b)
}

// TestSlowPingKeepsConnection: Dial's round-trip ping outlasting its wait
// (its frame's write alone takes 60 ms, initialize took a fraction of
// that) leaves the connection open and usable, with initialize's round
// trip. coder/websocket closes a connection whose write's context ends
// mid-write, so the ping must not carry Dial's wait as its deadline.
func TestSlowPingKeepsConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"ahp.v1"}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for { // answer every request (reading also answers pings)
			_, data, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(data, &req)
			_ = ws.Write(r.Context(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"protocolVersion":"ahp/1"}}`))
		}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return smallWritesSlow{c}, nil
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if rtt := conn.RTT(); rtt >= 60*time.Millisecond {
		t.Fatalf("round trip %v: the slow ping's, want initialize's", rtt)
	}
	time.Sleep(100 * time.Millisecond) // the ping's write is over
	var res map[string]any
	if err := conn.Call(ctx, "channels/list", map[string]any{}, &res); err != nil {
		t.Fatalf("a request after a slow ping: %v", err)
	}
}
