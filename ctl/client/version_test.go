package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestClientVersion: initialize carries Options.ClientVersion (ahpctl's
// build version), "dev" when unset.
func TestClientVersion(t *testing.T) {
	got := make(chan map[string]string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"ahp.v1"}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		_, data, err := ws.Read(r.Context())
		if err != nil {
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Client map[string]string `json:"client"`
			} `json:"params"`
		}
		_ = json.Unmarshal(data, &req)
		got <- req.Params.Client
		_ = ws.Write(r.Context(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"error":{"code":-32001,"message":"unauthorized"}}`))
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	for _, tc := range []struct{ version, want string }{{"1.2.3", "1.2.3"}, {"", "dev"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, err := Dial(ctx, url, Options{ClientName: "ahpctl attach", ClientVersion: tc.version})
		cancel()
		if err == nil {
			t.Fatal("Dial succeeded against a host that refuses")
		}
		c := <-got
		if c["name"] != "ahpctl attach" || c["version"] != tc.want {
			t.Errorf("ClientVersion %q: initialize sent client %v, want version %q", tc.version, c, tc.want)
		}
	}
}
